// Clock: the only way Tessera code reads time, so tests can control it.
//
// SystemClock reads the real clocks. FakeClock (common/fake_clock.h) is
// advanced by hand in tests.
// Thread safety: implementations must be safe to call from any thread.
#ifndef TESSERA_COMMON_CLOCK_H_
#define TESSERA_COMMON_CLOCK_H_

#include <chrono>
#include <cstdint>

namespace tessera {

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock milliseconds since the Unix epoch (for records and events).
  virtual int64_t NowUnixMillis() const = 0;
  // Monotonic time for timeouts and latency measurement.
  virtual std::chrono::steady_clock::time_point SteadyNow() const = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t NowUnixMillis() const override;
  std::chrono::steady_clock::time_point SteadyNow() const override;
  // A process-wide instance; never destroyed.
  static Clock* Default();
};

}  // namespace tessera

#endif  // TESSERA_COMMON_CLOCK_H_
