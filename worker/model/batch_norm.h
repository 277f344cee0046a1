// SyncBatchNorm: batch normalisation over [N, C, ...] that, when a
// BatchNormSync is given in training, normalises with the statistics of the
// union of all data-parallel replicas' batches (torch.nn.SyncBatchNorm
// semantics) and stays differentiable through the all-reduce.
//
// Training, no sync: plain batch norm with local batch statistics.
// Training, sync:    per-channel sum, sum of squares and count are all-reduced
//                    through BatchNormSync::AllReduceSum (one call with three
//                    tensors); in backward the gradients of sum and sum of
//                    squares are all-reduced through the same object (one call
//                    with three tensors: d_sum, d_sqsum, zeros for count).
//                    Every replica therefore makes the same sequence of calls.
// Evaluation:        running statistics; no collective.
// Running statistics are updated in training with `momentum` and the
// unbiased global variance, as torch::nn::BatchNorm2d does.
//
// Parameters "weight", "bias"; buffers "running_mean", "running_var".
// Thread safety: like torch::nn::Module, not thread-safe.
#ifndef TESSERA_WORKER_MODEL_BATCH_NORM_H_
#define TESSERA_WORKER_MODEL_BATCH_NORM_H_

#include <torch/torch.h>

#include <cstdint>

#include "worker/model/layered_model.h"

namespace tessera::worker {

class SyncBatchNorm : public torch::nn::Module {
 public:
  explicit SyncBatchNorm(int64_t channels, double momentum = 0.1, double eps = 1e-5);

  // x: [N, C, ...]. `sync` may be null (local statistics).
  // REQUIRES: `sync`, when not null, outlives the backward pass of the result.
  torch::Tensor Forward(const torch::Tensor& x, BatchNormSync* sync);

  int64_t channels() const { return channels_; }

 private:
  int64_t channels_;
  double momentum_;
  double eps_;
  torch::Tensor weight_;
  torch::Tensor bias_;
  torch::Tensor running_mean_;
  torch::Tensor running_var_;
};

// Sum over replicas of (sum, sqsum, count), differentiable in sum and sqsum:
// backward all-reduces their gradients through `sync`. Exposed for tests.
// REQUIRES: sync != nullptr and outlives the backward pass.
std::vector<torch::Tensor> AllReduceBatchStats(const torch::Tensor& sum, const torch::Tensor& sqsum,
                                               const torch::Tensor& count, BatchNormSync* sync);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_MODEL_BATCH_NORM_H_
