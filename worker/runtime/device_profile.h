// The ProfileMeter (worker/model/profile.h) of the device a profile is measured
// on, so `tessera-worker profile --device cuda:N` measures the model where its
// ranks will run:
//   - the CPU: MakeCpuProfileMeter (CPU milliseconds, counting allocator);
//   - a CUDA GPU: wall milliseconds between two synchronisations of the device
//     (queued kernels finished before a timed call starts and before it ends,
//     as torch.cuda.synchronize() around a timed region does; kernel launch
//     costs included, which a profile's per-call part, --fixed-batch, separates
//     from the per-sample part), clock "cuda_wall"; bytes from the CUDA caching
//     allocator's statistics (worker/runtime/device_memory.h), what
//     torch.cuda.memory_allocated / max_memory_allocated report.
// Thread safety: one thread, no concurrent torch work on the device.
#ifndef TESSERA_WORKER_RUNTIME_DEVICE_PROFILE_H_
#define TESSERA_WORKER_RUNTIME_DEVICE_PROFILE_H_

#include <torch/torch.h>

#include <memory>

#include "worker/model/profile.h"

namespace tessera::worker {

// The meter of `device` (resolved by SelectRankDevice, rank_device.h, which makes
// a GPU the current CUDA device).
std::unique_ptr<ProfileMeter> MakeDeviceProfileMeter(const torch::Device& device);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_DEVICE_PROFILE_H_
