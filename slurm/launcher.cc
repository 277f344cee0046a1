#include "slurm/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <vector>

#include "common/atomic_file.h"
#include "common/process_launcher.h"
#include "common/quantities.h"
#include "launch/worker_env.h"

namespace tessera::slurm {
namespace {

volatile sig_atomic_t g_child_group = 0;

void Forward(int sig) {
  if (g_child_group > 0) ::kill(-g_child_group, sig);
}

// Appends one line to a file (the rank's log), as best it can.
void AppendLine(const std::filesystem::path& file, const std::string& line) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const std::string text = line + "\n";
  ssize_t ignored = ::write(fd, text.data(), text.size());
  (void)ignored;
  ::close(fd);
}

}  // namespace

Result<TaskLaunch> PrepareTask(const SlurmAttempt& attempt,
                               const std::map<std::string, std::string>& slurm_env,
                               const launch::EnvMap& base_env) {
  auto get = [&](const char* name) {
    auto it = slurm_env.find(name);
    return it == slurm_env.end() ? std::string() : it->second;
  };
  const std::string node = get("SLURMD_NODENAME");
  if (node.empty()) return InvalidArgument("not set: not a Slurm task", "SLURMD_NODENAME");
  auto local = ParseWholeNumber(get("SLURM_LOCALID"));
  if (!local) return InvalidArgument("not set or not a number", "SLURM_LOCALID");
  if (auto het = get("SLURM_HET_SIZE"); !het.empty()) {
    auto size = ParseWholeNumber(het);
    if (!size || *size != static_cast<int64_t>(attempt.mapping.components.size())) {
      return InvalidArgument("is " + het + " but the attempt has " +
                                 std::to_string(attempt.mapping.components.size()) + " components",
                             "SLURM_HET_SIZE");
    }
  }
  auto rank = RankAt(attempt.mapping, node, *local);
  if (!rank) {
    return InvalidArgument("no rank of job " + std::to_string(attempt.job_id) + " attempt " +
                               std::to_string(attempt.attempt) + " is task " +
                               std::to_string(*local) + " on " + node,
                           "SLURM_LOCALID");
  }
  TaskLaunch t;
  t.rank = *rank;
  t.launch = attempt.launches[static_cast<size_t>(*rank)];
  t.paths = launch::RankPathsFor(attempt.rank_root, t.launch.key);

  std::vector<api::Device> devices;
  int64_t cores = 0;
  if (auto n = attempt.nodes.find(node); n != attempt.nodes.end()) {
    devices = n->second.devices;
    cores = n->second.cpu_cores;
  }
  std::vector<api::WorkerLaunch> siblings;
  for (size_t r = 0; r < attempt.launches.size(); ++r) {
    if (attempt.mapping.ranks[r].node == node) siblings.push_back(attempt.launches[r]);
  }
  TESSERA_ASSIGN_OR_RETURN(launch::EnvMap device_env,
                           launch::DeviceEnvFor(t.launch, siblings, devices, cores));
  bool real_gpu = false;
  for (int64_t i : t.launch.device_indices) {
    const api::Device* d = launch::FindDevice(devices, i);
    real_gpu = real_gpu || (d != nullptr && d->type == "cuda" && !d->emulated);
  }
  if (real_gpu) {
    // Slurm binds the step's GPUs on this node; the rank's is cuda:LOCAL_RANK.
    device_env["CUDA_VISIBLE_DEVICES"] = get("CUDA_VISIBLE_DEVICES");
    auto lr = t.launch.env.find("LOCAL_RANK");
    device_env["TESSERA_DEVICE"] =
        "cuda:" + (lr == t.launch.env.end() ? std::to_string(*local) : lr->second);
  }

  t.env = base_env;
  for (const auto& [k, v] : slurm_env) {
    if (k.rfind("SLURM", 0) == 0) t.env[k] = v;
  }
  for (const auto& [k, v] : t.launch.env) t.env[k] = v;
  for (const auto& [k, v] : device_env) t.env[k] = v;
  t.env["TESSERA_PLAN"] = t.paths.plan.string();
  t.env["TESSERA_PROGRESS_FILE"] = t.paths.progress.string();
  t.env["TESSERA_JOB_ID"] = std::to_string(t.launch.key.job_id);
  t.env["TESSERA_ATTEMPT"] = std::to_string(t.launch.key.attempt);
  t.env["RANK"] = std::to_string(t.launch.key.rank);
  return t;
}

Result<int> RunTask(const TaskLaunch& task, const RunTaskOptions& options) {
  FileSystem& fs = *options.fs;
  const launch::RankPaths& p = task.paths;
  TESSERA_RETURN_IF_ERROR(fs.CreateDirs(p.dir));
  if (task.launch.argv.empty() || task.launch.argv[0].empty() || task.launch.argv[0][0] != '/') {
    return InvalidArgument("argv[0] must be an absolute path", "argv[0]");
  }
  TESSERA_RETURN_IF_ERROR(WriteFileAtomically(fs, p.plan, task.launch.plan.dump(2) + "\n"));
  int progress_fd = ::open(p.progress.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (progress_fd >= 0) ::close(progress_fd);
  int log_fd = ::open(p.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return Internal("cannot open " + p.log.string());

  ProcessSpec spec;
  spec.argv = task.launch.argv;
  spec.env.emplace();
  for (const auto& [k, v] : task.env) spec.env->push_back(k + "=" + v);
  spec.cwd = p.dir.string();
  spec.stdin_from = ChildStdio::Null();
  spec.stdout_to = ChildStdio::Fd(log_fd);
  spec.stderr_to = ChildStdio::Fd(log_fd);
  spec.group = ChildProcessGroup::kNewGroup;
  spec.on_start_failure = StartFailure::kExitInChild;  // exit 127, recorded as the rank's code
  spec.start_failure_message = "tessera-slurm-launch: cannot execute the rank's command\n";

  // Signals that arrive before the child exists are held until it does.
  sigset_t forwarded, old;
  sigemptyset(&forwarded);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2}) sigaddset(&forwarded, sig);
  sigprocmask(SIG_BLOCK, &forwarded, &old);
  spec.signal_mask = old;  // the child gets the mask this process had
  Result<pid_t> started = options.launcher->Launch(spec);
  if (!started.ok()) {
    ::close(log_fd);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    return started.status();
  }
  const pid_t pid = *started;
  ::close(log_fd);
  g_child_group = pid;
  struct sigaction sa {};
  sa.sa_handler = Forward;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2}) sigaction(sig, &sa, nullptr);
  sigprocmask(SIG_SETMASK, &old, nullptr);
  Status recorded =
      WriteFileAtomically(fs, p.pid, api::Json{{"pid", pid}, {"pgid", pid}}.dump() + "\n");
  if (!recorded.ok()) {
    AppendLine(p.log, "tessera-slurm-launch: cannot record the pid of rank " +
                          std::to_string(task.rank) + ": " + recorded.ToString());
  }

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  TESSERA_RETURN_IF_ERROR(WriteFileAtomically(
      fs, p.exit,
      api::Json{{"exit_code", code}, {"ended_ms", options.clock->NowUnixMillis()}}.dump() + "\n"));
  return code;
}

}  // namespace tessera::slurm
