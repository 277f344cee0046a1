// EmulatedDevice: makes a rank computing on the host CPU behave like an
// independent accelerator of a declared relative speed.
//
// Purpose: emulated devices are the physics every planning decision is tested
// against, so their busy time must depend only on the work the rank did and
// the device's speed, never on how many other ranks share this host's cores.
// A compute segment (a micro-batch forward or backward, an optimizer step, an
// inference forward) is timed in CPU seconds of the threads that compute it;
// the segment then lasts until `start + cpu_seconds / speed` of wall time:
//
//   busy = max(wall of the work itself, cpu_seconds / speed)
//
// Time the rank spent waiting for a host core, or blocked in a collective
// inside the segment (batch-norm all-reduce), is not CPU time and so is not
// multiplied. The only way the busy time can exceed cpu_seconds / speed is a
// host that cannot give the rank `speed` of a core while it computes: the
// agent refuses inventories whose emulated speeds add up to more than the
// host's cores (agent/inventory.h EmulationCapacity).
//
// Which CPU clock: with one intra-op thread (the default, --threads 1) the
// calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), so the prefetching
// data thread and the Gloo I/O threads do not count as device work. With more
// intra-op threads the compute runs on a pool too, and the whole process's CPU
// time is used (CLOCK_PROCESS_CPUTIME_ID): data loading and collectives that
// run during a segment then count as device work, an over-estimate documented
// in worker/runtime/README.md.
//
// A speed of 1 (or more) does not hold: the segment lasts as long as its work.
//
// Real GPUs are never emulated: a rank on one gets speed 1 and a `settle`
// callback (rank_device.h SegmentClockFor) that waits for the segment's queued
// kernels before the clock is read, so busy_s is the GPU's time for the segment,
// not the host's time to launch it.
// Ownership: a value. Thread safety: one EmulatedDevice per rank; Begin/End
// pairs must run on one thread.
#ifndef TESSERA_WORKER_RUNTIME_EMULATED_DEVICE_H_
#define TESSERA_WORKER_RUNTIME_EMULATED_DEVICE_H_

#include <chrono>
#include <functional>

#include "common/cpu_time.h"

namespace tessera::worker {

class EmulatedDevice {
 public:
  using Clock = std::chrono::steady_clock;

  struct Segment {
    Clock::time_point wall0;
    double cpu0 = 0;
  };
  struct SegmentTimes {
    double busy_s = 0;  // wall time from Begin to the end of the hold
    double cpu_s = 0;   // CPU seconds of the compute threads in the segment
  };

  // REQUIRES: speed > 0. threads: the rank's intra-op threads (selects the clock).
  // settle: when set, End calls it before reading the clock (a GPU's stream sync).
  explicit EmulatedDevice(double speed = 1.0, int threads = 1,
                          std::function<void()> settle = nullptr);

  double speed() const { return speed_; }
  bool holds() const { return speed_ < 1.0; }

  // Starts a compute segment on the calling thread.
  Segment Begin() const;
  // Ends it: sleeps until Begin + cpu_s / speed when that is later than now.
  SegmentTimes End(const Segment& segment) const;

 private:
  double speed_;
  CpuClock clock_;
  std::function<void()> settle_;
};

// Runs `work` as one compute segment of `device`; returns its times.
template <typename F>
EmulatedDevice::SegmentTimes RunSegment(const EmulatedDevice& device, F&& work) {
  const EmulatedDevice::Segment s = device.Begin();
  work();
  return device.End(s);
}

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_EMULATED_DEVICE_H_
