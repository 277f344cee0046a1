#include "common/cpu_time.h"

#include <time.h>

namespace tessera {

CpuClock CpuClockFor(int intra_op_threads) {
  return intra_op_threads > 1 ? CpuClock::kProcess : CpuClock::kThread;
}

double CpuSeconds(CpuClock clock) {
  timespec ts{};
  clock_gettime(clock == CpuClock::kThread ? CLOCK_THREAD_CPUTIME_ID : CLOCK_PROCESS_CPUTIME_ID,
                &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

const char* CpuClockName(CpuClock clock) {
  return clock == CpuClock::kThread ? "thread_cpu" : "process_cpu";
}

}  // namespace tessera
