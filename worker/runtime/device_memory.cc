#include "worker/runtime/device_memory.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>

#include <algorithm>

#include "worker/runtime/emulated_memory.h"

namespace tessera::worker {
namespace {

constexpr size_t kAggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

// The caching allocator's allocated bytes of a CUDA device, over all its pools.
c10::CachingAllocator::Stat Allocated(const torch::Device& device) {
  return c10::cuda::CUDACachingAllocator::getDeviceStats(device.index())
      .allocated_bytes[kAggregate];
}

}  // namespace

torch::Tensor ToDevice(const torch::Tensor& host, const torch::Device& device) {
  if (!device.is_cuda() || !host.defined() || !host.device().is_cpu()) return host.to(device);
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

int64_t PeakBytes(const torch::Device& device) {
  if (device.is_cuda()) return Allocated(device).peak;
  return EmulatedMemory::installed() ? EmulatedMemory::peak_bytes() : -1;
}

void ResetPeak(const torch::Device& device) {
  if (device.is_cuda()) {
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
  } else if (EmulatedMemory::installed()) {
    EmulatedMemory::ResetPeak();
  }
}

int64_t InUseBytes(const torch::Device& device) {
  if (device.is_cuda()) return Allocated(device).current;
  return EmulatedMemory::installed() ? EmulatedMemory::in_use_bytes() : -1;
}

int64_t FreeBytes(const torch::Device& device) {
  if (device.is_cuda()) {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return -1;
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    const int64_t cached =
        stats.reserved_bytes[kAggregate].current - stats.allocated_bytes[kAggregate].current;
    return static_cast<int64_t>(free) + std::max<int64_t>(0, cached);
  }
  if (!EmulatedMemory::installed() || EmulatedMemory::limit_bytes() <= 0) return -1;
  return std::max<int64_t>(0, EmulatedMemory::limit_bytes() - EmulatedMemory::in_use_bytes());
}

}  // namespace tessera::worker
