// tessera-slurm-launch ATTEMPT_FILE: runs one rank of a Tessera attempt in a
// Slurm task (slurm/launcher.h). Exit code: the rank's, or 2 when the task
// cannot be matched to a rank, 127 when the rank cannot start.
#include <iostream>
#include <map>
#include <string>

#include "common/file_system.h"
#include "launch/worker_env.h"
#include "slurm/launcher.h"

extern char** environ;

int main(int argc, char** argv) {
  using namespace tessera;
  if (argc != 2) {
    std::cerr << "usage: tessera-slurm-launch ATTEMPT_FILE (run by srun in a Tessera job)\n";
    return 2;
  }
  Result<std::string> text = FileSystem::Default()->ReadFile(argv[1]);
  api::Json j = text.ok() ? api::Json::parse(*text, nullptr, /*allow_exceptions=*/false)
                          : api::Json(api::Json::value_t::discarded);
  if (j.is_discarded()) {
    std::cerr << "tessera-slurm-launch: cannot read " << argv[1] << "\n";
    return 2;
  }
  auto attempt = slurm::SlurmAttemptFromJson(j);
  if (!attempt.ok()) {
    std::cerr << "tessera-slurm-launch: " << argv[1] << ": " << attempt.status().ToString() << "\n";
    return 2;
  }
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  auto task = slurm::PrepareTask(*attempt, env, launch::DefaultBaseEnv());
  if (!task.ok()) {
    std::cerr << "tessera-slurm-launch: " << task.status().ToString() << "\n";
    return 2;
  }
  auto code = slurm::RunTask(*task);
  if (!code.ok()) {
    std::cerr << "tessera-slurm-launch: rank " << task->rank << ": " << code.status().ToString()
              << "\n";
    return 127;
  }
  return *code;
}
