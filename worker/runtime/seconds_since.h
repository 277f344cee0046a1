// SecondsSince: the seconds of monotonic (steady) time from `start` to now:
// how the worker times its steps, stages, waits and chunks.
// Thread safety: a function; safe from any thread.
#ifndef TESSERA_WORKER_RUNTIME_SECONDS_SINCE_H_
#define TESSERA_WORKER_RUNTIME_SECONDS_SINCE_H_

#include <chrono>

namespace tessera::worker {

inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_SECONDS_SINCE_H_
