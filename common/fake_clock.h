// FakeClock: a Clock that moves only when a test calls Advance().
// Thread safety: all methods are safe to call concurrently.
#ifndef TESSERA_COMMON_FAKE_CLOCK_H_
#define TESSERA_COMMON_FAKE_CLOCK_H_

#include <atomic>

#include "common/clock.h"

namespace tessera {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t start_unix_millis = 1'700'000'000'000) : unix_ms_(start_unix_millis) {}

  int64_t NowUnixMillis() const override { return unix_ms_.load(); }
  std::chrono::steady_clock::time_point SteadyNow() const override {
    return std::chrono::steady_clock::time_point(std::chrono::milliseconds(steady_ms_.load()));
  }
  void Advance(std::chrono::milliseconds d) {
    unix_ms_ += d.count();
    steady_ms_ += d.count();
  }

 private:
  std::atomic<int64_t> unix_ms_;
  std::atomic<int64_t> steady_ms_{0};
};

}  // namespace tessera

#endif  // TESSERA_COMMON_FAKE_CLOCK_H_
