#include "common/faulty_process_launcher.h"

#include <cstring>

namespace tessera {

void FaultyProcessLauncher::FailNextLaunch(int err, std::string program_part) {
  std::lock_guard lock(mu_);
  faults_.push_back(Fault{err, std::move(program_part)});
}

int FaultyProcessLauncher::fired() const {
  std::lock_guard lock(mu_);
  return fired_;
}

Result<pid_t> FaultyProcessLauncher::Launch(const ProcessSpec& spec) {
  {
    std::lock_guard lock(mu_);
    const std::string program = spec.argv.empty() ? "" : spec.argv[0];
    for (auto it = faults_.begin(); it != faults_.end(); ++it) {
      if (program.find(it->program_part) == std::string::npos) continue;
      const int err = it->err;
      faults_.erase(it);
      ++fired_;
      return Internal(std::string("fork failed: ") + std::strerror(err));
    }
  }
  return base_->Launch(spec);
}

}  // namespace tessera
