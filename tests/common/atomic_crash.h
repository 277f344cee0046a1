// The crash points of an atomic write (common/atomic_file.h) that tests walk
// through: each step, whether the final file exists after a crash there, and
// the AtomicWriteOptions that "crash" (fail with kInternal) at that step.
#ifndef TESSERA_TESTS_COMMON_ATOMIC_CRASH_H_
#define TESSERA_TESTS_COMMON_ATOMIC_CRASH_H_

#include <string>

#include "common/atomic_file.h"
#include "common/status.h"

namespace tessera::testing {

struct AtomicCrash {
  AtomicWriteStep step;
  bool final_exists;  // only a crash after the rename leaves the final file
};

inline constexpr AtomicCrash kAtomicCrashes[] = {{AtomicWriteStep::kAfterWrite, false},
                                                 {AtomicWriteStep::kAfterSync, false},
                                                 {AtomicWriteStep::kAfterRename, true}};

inline AtomicWriteOptions CrashAt(AtomicWriteStep at) {
  AtomicWriteOptions crash;
  crash.faults = [at](AtomicWriteStep step, const std::string&) -> Status {
    return step == at ? Internal("simulated crash") : Status::Ok();
  };
  return crash;
}

}  // namespace tessera::testing

#endif  // TESSERA_TESTS_COMMON_ATOMIC_CRASH_H_
