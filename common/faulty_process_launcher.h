// FaultyProcessLauncher: a ProcessLauncher that fails chosen launches, for
// tests of what a caller does when a child cannot be started. Other
// launches go to a real ProcessLauncher.
//
// FailNextLaunch(err, program_part) arms one fault: the next Launch whose
// argv[0] contains `program_part` ("" matches every program) starts nothing
// and returns what a failed fork returns, kInternal "fork failed: <errno
// text>". Faults fire once each, in the order armed.
//
// Ownership: `base` is not owned and must outlive this object.
// Thread safety: every method may be called from any thread.
#ifndef TESSERA_COMMON_FAULTY_PROCESS_LAUNCHER_H_
#define TESSERA_COMMON_FAULTY_PROCESS_LAUNCHER_H_

#include <deque>
#include <mutex>
#include <string>

#include "common/process_launcher.h"

namespace tessera {

class FaultyProcessLauncher final : public ProcessLauncher {
 public:
  explicit FaultyProcessLauncher(ProcessLauncher* base = ProcessLauncher::Default())
      : base_(base) {}

  void FailNextLaunch(int err, std::string program_part = "");
  // How many armed faults have fired so far.
  int fired() const;

  Result<pid_t> Launch(const ProcessSpec& spec) override;

 private:
  struct Fault {
    int err;
    std::string program_part;
  };
  ProcessLauncher* const base_;
  mutable std::mutex mu_;
  std::deque<Fault> faults_;  // guarded by mu_
  int fired_ = 0;             // guarded by mu_
};

}  // namespace tessera

#endif  // TESSERA_COMMON_FAULTY_PROCESS_LAUNCHER_H_
