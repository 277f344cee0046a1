#include "worker/runtime/emulated_device.h"

#include <thread>

#include "worker/runtime/seconds_since.h"

namespace tessera::worker {

EmulatedDevice::EmulatedDevice(double speed, int threads, std::function<void()> settle)
    : speed_(speed > 0 ? speed : 1.0), clock_(CpuClockFor(threads)), settle_(std::move(settle)) {}

EmulatedDevice::Segment EmulatedDevice::Begin() const { return {Clock::now(), CpuSeconds(clock_)}; }

EmulatedDevice::SegmentTimes EmulatedDevice::End(const Segment& segment) const {
  if (settle_) settle_();
  SegmentTimes t;
  t.cpu_s = CpuSeconds(clock_) - segment.cpu0;
  if (holds()) {
    const auto until = segment.wall0 + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(t.cpu_s / speed_));
    std::this_thread::sleep_until(until);
  }
  t.busy_s = SecondsSince(segment.wall0);
  return t;
}

}  // namespace tessera::worker
