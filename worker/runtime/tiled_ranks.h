// TiledRanks: the "tiled" inference layout over c10d. Rank 0 broadcasts each
// image's padded model input; every rank runs its share of the image's tiles
// (contiguous runs of the tile grid proportional to the ranks' weights, i.e.
// device speed) and sends the owned parts to rank 0, which assembles the
// output. The output equals the whole image's (tiling.h), whichever rank
// computed which tile.
//
// Ownership: borrows the collectives and the model (both outlive it).
// Thread safety: one thread per rank calls it; rank 0 calls Run per image and
// Finish once, ranks > 0 call Serve once.
#ifndef TESSERA_WORKER_RUNTIME_TILED_RANKS_H_
#define TESSERA_WORKER_RUNTIME_TILED_RANKS_H_

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "worker/runtime/collectives.h"
#include "worker/runtime/inference_model.h"
#include "worker/runtime/tiling.h"

namespace tessera::worker {

class TiledRanks {
 public:
  // REQUIRES: weights.size() == world.size(), at least one weight > 0.
  TiledRanks(Collectives& world, InferenceModel& model, TileSpec spec, std::vector<int64_t> weights,
             torch::Device comm_device);

  // Rank 0: the assembled output [Co, H, W] of one prepared input [C, H, W].
  Result<torch::Tensor> Run(const torch::Tensor& input);
  // Rank 0: tells the others to stop (abort: rank 0 failed, they fail too).
  Status Finish(bool abort);
  // Ranks > 0: serve until rank 0 says done; returns the images served.
  Result<int64_t> Serve();

  int64_t tiles_computed() const { return tiles_computed_; }

 private:
  Status Bcast(torch::Tensor& t);
  // Every rank: runs its share; rank 0 returns the assembled output, others
  // send their owned parts to rank 0 and return an undefined tensor.
  Result<torch::Tensor> Compute(const torch::Tensor& input);
  // Output channels from a forward pass on a small blank input (rank 0 had
  // no tile of the first image).
  Result<int64_t> ProbeOutputChannels();

  Collectives& world_;
  InferenceModel& model_;
  TileSpec spec_;
  std::vector<int64_t> weights_;
  torch::Device comm_device_;
  int64_t out_channels_ = 0;
  int64_t tiles_computed_ = 0;
};

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_TILED_RANKS_H_
