// DeviceMemory: host-to-device copies and the memory a rank's device holds, the
// same calls on a CPU, an emulated device and a real GPU.
//
//  - ToDevice: a host tensor bound for a CUDA device is copied from pinned
//    (page-locked) memory, asynchronously on the current stream, as PyTorch's
//    DataLoader(pin_memory=True) + .to(non_blocking=True) does; pageable memory
//    would make CUDA stage every copy through a bounce buffer and block the host.
//    On the CPU it is the tensor itself.
//  - PeakBytes / ResetPeak: on a CUDA device, the CUDA caching allocator's peak
//    of allocated bytes (what torch.cuda.max_memory_allocated reports); on an
//    emulated device, the counting CPU allocator's peak (emulated_memory.h);
//    otherwise nothing is measured (-1).
//  - InUseBytes / FreeBytes: what the device holds now and what it could
//    still take, measured the same way.
//
// Thread safety: ToDevice from any thread; PeakBytes/ResetPeak read and reset
// process-wide counters.
#ifndef TESSERA_WORKER_RUNTIME_DEVICE_MEMORY_H_
#define TESSERA_WORKER_RUNTIME_DEVICE_MEMORY_H_

#include <torch/torch.h>

#include <cstdint>

namespace tessera::worker {

torch::Tensor ToDevice(const torch::Tensor& host, const torch::Device& device);

// -1 when nothing measures the device's memory.
int64_t PeakBytes(const torch::Device& device);
void ResetPeak(const torch::Device& device);
// Bytes of tensors the device holds now (-1: not measured).
int64_t InUseBytes(const torch::Device& device);
// Bytes more tensors could take: on a CUDA device the driver's free memory
// plus what the caching allocator holds unused; on an emulated device with a
// limit, the limit less InUseBytes; otherwise -1 (no bound known).
int64_t FreeBytes(const torch::Device& device);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_DEVICE_MEMORY_H_
