#include "worker/runtime/device_memory.h"

#include <c10/cuda/CUDACachingAllocator.h>

#include "worker/runtime/emulated_memory.h"

namespace tessera::worker {
namespace {

constexpr size_t kAggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

}  // namespace

torch::Tensor ToDevice(const torch::Tensor& host, const torch::Device& device) {
  if (!device.is_cuda() || !host.defined() || !host.device().is_cpu()) return host.to(device);
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

int64_t PeakBytes(const torch::Device& device) {
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return stats.allocated_bytes[kAggregate].peak;
  }
  return EmulatedMemory::installed() ? EmulatedMemory::peak_bytes() : -1;
}

void ResetPeak(const torch::Device& device) {
  if (device.is_cuda()) {
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
  } else if (EmulatedMemory::installed()) {
    EmulatedMemory::ResetPeak();
  }
}

}  // namespace tessera::worker
