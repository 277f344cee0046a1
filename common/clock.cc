#include "common/clock.h"

namespace tessera {

int64_t SystemClock::NowUnixMillis() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::chrono::steady_clock::time_point SystemClock::SteadyNow() const {
  return std::chrono::steady_clock::now();
}

Clock* SystemClock::Default() {
  static SystemClock* clock = new SystemClock();
  return clock;
}

}  // namespace tessera
