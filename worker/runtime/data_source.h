// BatchSource: where a rank's training samples come from.
//
// Samples are numbered globally and endlessly: step s uses ids
// [s * global_batch, (s + 1) * global_batch); replica r takes the slice at
// its sample_offset, and micro-batches are sub-slices. The sample an id maps
// to depends only on the id and the seed, never on the layout, so any layout
// (and a resume onto another layout) sees the same data for the same step.
//
// Thread safety: a source is used by one thread.
#ifndef TESSERA_WORKER_RUNTIME_DATA_SOURCE_H_
#define TESSERA_WORKER_RUNTIME_DATA_SOURCE_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>

#include "common/status.h"

namespace tessera::worker {

struct SampleBatch {
  torch::Tensor input;
  torch::Tensor target;
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Samples [first_id, first_id + count).
  virtual Result<SampleBatch> Load(int64_t first_id, int64_t count) = 0;
};

// Wraps `inner` so that loading overlaps compute: after serving samples
// [first, first + count) it prepares [first + stride, first + stride + count)
// on a background thread (stride = the global batch: the same slice of the
// next step). A request that was prepared is served from it; any other is
// loaded at once. The samples are exactly those `inner` gives, so results do
// not depend on prefetching. `inner` is only ever used by one thread at a time.
std::unique_ptr<BatchSource> MakePrefetchingSource(std::unique_ptr<BatchSource> inner,
                                                   int64_t stride);

// Threads that prepare each batch's images (MakeImageSource's loader_threads):
// `requested` when positive; otherwise, on a CUDA device, the rank's share of
// the host's hardware threads (divided among the node's `local_world_size`
// ranks) less the one that launches its GPU work, from 1 to 16 (a GPU step
// outruns one thread decoding and converting its images), and 1 on the CPU (an
// emulated device's compute is its rank's CPU, which the loader would take).
// hardware_threads 0 (unknown) counts as 1.
int LoaderThreads(int requested, const torch::Device& device, int local_world_size,
                  unsigned hardware_threads);

// Regression data for the tiny models: x ~ N(0, 1)^features drawn from a
// generator seeded by (seed, id); target = sin(x W) for a fixed W.
std::unique_ptr<BatchSource> MakeSyntheticSource(int64_t features, int64_t outputs, uint64_t seed);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_DATA_SOURCE_H_
