// CPU time: how long threads of this process actually computed.
//
// Purpose: an emulated device's busy time is the CPU work its rank did over
// its speed (worker/runtime/emulated_device.h), and the model profile that
// the planner predicts with measures each layer on the same clock, so the two
// agree whatever else shares the host's cores: time spent waiting for a core
// is not CPU time.
//
// Which clock: the calling thread's (CLOCK_THREAD_CPUTIME_ID) when compute
// runs on that thread alone (one intra-op thread); the whole process's
// (CLOCK_PROCESS_CPUTIME_ID) when an intra-op pool computes too.
// Thread safety: free functions, safe from any thread.
#ifndef TESSERA_COMMON_CPU_TIME_H_
#define TESSERA_COMMON_CPU_TIME_H_

namespace tessera {

enum class CpuClock { kThread, kProcess };

// The clock that covers compute run with `intra_op_threads` threads.
CpuClock CpuClockFor(int intra_op_threads);

// CPU seconds consumed so far by the calling thread or the whole process.
double CpuSeconds(CpuClock clock);

// "thread_cpu" or "process_cpu" (recorded with measurements).
const char* CpuClockName(CpuClock clock);

}  // namespace tessera

#endif  // TESSERA_COMMON_CPU_TIME_H_
