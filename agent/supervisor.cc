#include "agent/supervisor.h"

#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <system_error>

#include "agent/port_holders.h"
#include "api/job_spec_validation.h"
#include "common/atomic_file.h"
#include "common/process_launcher.h"

namespace tessera::agent {
namespace {

using api::Json;
using api::WorkerKey;
using api::WorkerState;

std::string KeyText(const WorkerKey& k) {
  return "job " + std::to_string(k.job_id) + " attempt " + std::to_string(k.attempt) + " rank " +
         std::to_string(k.rank);
}

// Process start time in clock ticks since boot (/proc/<pid>/stat field 22),
// and the one-letter state; nullopt when the process does not exist.
struct ProcStat {
  char state = '?';
  uint64_t start_ticks = 0;
};
std::optional<ProcStat> ReadProcStat(FileSystem& fs, pid_t pid) {
  auto text = fs.ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (!text.ok()) return std::nullopt;
  size_t paren = text->rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(text->substr(paren + 1));
  std::string field;
  ProcStat out;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 3) out.state = field.empty() ? '?' : field[0];
    if (i == 22) out.start_ticks = std::strtoull(field.c_str(), nullptr, 10);
  }
  return out;
}

// True when /proc/<pid>/environ is readable and lacks one of `want`.
bool OwnEnvironContradicts(FileSystem& fs, pid_t pid, const launch::EnvMap& want);

// The recorded pid is the worker's shim, whose environment is the agent's;
// the identity is in the environment of the worker, its child.
bool EnvironContradicts(FileSystem& fs, pid_t pid, const launch::EnvMap& want) {
  if (!OwnEnvironContradicts(fs, pid, want)) return false;
  auto children =
      fs.ReadFile("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  if (!children.ok()) return true;
  std::istringstream in(*children);
  pid_t child = 0;
  while (in >> child) {
    if (!OwnEnvironContradicts(fs, child, want)) return false;
  }
  return true;
}

bool OwnEnvironContradicts(FileSystem& fs, pid_t pid, const launch::EnvMap& want) {
  auto text = fs.ReadFile("/proc/" + std::to_string(pid) + "/environ");
  if (!text.ok() || text->empty()) return false;  // unreadable: rely on start time
  launch::EnvMap have;
  size_t pos = 0;
  while (pos < text->size()) {
    size_t end = text->find('\0', pos);
    if (end == std::string::npos) end = text->size();
    std::string entry = text->substr(pos, end - pos);
    auto eq = entry.find('=');
    if (eq != std::string::npos) have[entry.substr(0, eq)] = entry.substr(eq + 1);
    pos = end + 1;
  }
  for (const auto& [k, v] : want) {
    auto it = have.find(k);
    // A worker started before TESSERA_RANK_KEY existed carries its key's rank as RANK.
    if (it == have.end() && k == "TESSERA_RANK_KEY") it = have.find("RANK");
    if (it == have.end() || it->second != v) return true;
  }
  return false;
}

// The key's rank has a variable of its own: a rank that joined a running
// world (WorkerLaunch::reform) has another RANK in that world.
launch::EnvMap IdentityEnv(const WorkerKey& key) {
  return {{"TESSERA_JOB_ID", std::to_string(key.job_id)},
          {"TESSERA_ATTEMPT", std::to_string(key.attempt)},
          {"TESSERA_RANK_KEY", std::to_string(key.rank)}};
}

std::optional<int64_t> ReadExitCode(FileSystem& fs, const launch::RankPaths& paths) {
  auto text = fs.ReadFile(paths.exit);
  if (!text.ok()) return std::nullopt;
  Json j = Json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("exit_code") || !j["exit_code"].is_number_integer()) {
    return kExitCodeUnknown;  // an exit was recorded, its code is damaged
  }
  return j["exit_code"].get<int64_t>();
}

// The exit code the worker's shim wrote when the worker ended, if it did.
std::optional<int64_t> ReadShimExitCode(FileSystem& fs, const launch::RankPaths& paths) {
  auto text = fs.ReadFile(paths.dir / "exit_code");
  if (!text.ok()) return std::nullopt;
  std::istringstream in(*text);
  int64_t code = 0;
  if (in >> code) return code;
  return std::nullopt;
}

void AppendToLog(const std::filesystem::path& log, const std::string& line) {
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  std::string text = line + "\n";
  ssize_t ignored = ::write(fd, text.data(), text.size());
  (void)ignored;
  ::close(fd);
}

bool GroupAlive(pid_t pgid) { return ::kill(-pgid, 0) == 0 || errno == EPERM; }

// The account a worker runs as (WorkerLaunch.run_as), resolved before fork:
// getpwnam and getgrouplist are not async-signal-safe.
struct Account {
  bool drop = false;  // setgroups/setgid/setuid in the child before exec
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  std::string name, home;
};

Result<Account> ResolveAccount(const std::string& name) {
  Account a;
  if (name.empty()) return a;
  std::vector<char> buffer(16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  if (::getpwnam_r(name.c_str(), &pw, buffer.data(), buffer.size(), &found) != 0 ||
      found == nullptr) {
    return InvalidArgument("no Unix account \"" + name + "\" on this node", "run_as");
  }
  if (pw.pw_uid == 0) return InvalidArgument("workers never run as root", "run_as");
  a.uid = pw.pw_uid;
  a.gid = pw.pw_gid;
  a.name = pw.pw_name;
  a.home = pw.pw_dir;
  if (::geteuid() != 0) {
    if (::geteuid() == a.uid) return a;  // already that account: nothing to drop
    return FailedPrecondition("the agent does not run as root, so it cannot start workers as \"" +
                              name + "\"");
  }
  int count = 64;
  a.groups.resize(static_cast<size_t>(count));
  if (::getgrouplist(a.name.c_str(), a.gid, a.groups.data(), &count) < 0) {
    a.groups.resize(static_cast<size_t>(count));
    ::getgrouplist(a.name.c_str(), a.gid, a.groups.data(), &count);
  }
  a.groups.resize(static_cast<size_t>(std::max(count, 0)));
  a.drop = true;
  return a;
}

// Rank 0 hosts the c10d store on MASTER_PORT: the port must be free on this
// node, or the rank would fail later with a rendezvous error (or, worse,
// meet another job's store). A bind with SO_REUSEADDR, as the store does,
// fails only while something listens there.
Status CheckMasterPortFree(const api::WorkerLaunch& launch) {
  auto rank = launch.env.find("RANK");
  auto port_text = launch.env.find("MASTER_PORT");
  if (rank == launch.env.end() || rank->second != "0" || port_text == launch.env.end()) {
    return Status::Ok();
  }
  int port = 0;
  try {
    port = std::stoi(port_text->second);
  } catch (const std::exception&) {
    return InvalidArgument("is not a port number", "env.MASTER_PORT");
  }
  if (port <= 0 || port > 65535) return InvalidArgument("is not a port number", "env.MASTER_PORT");
  for (int family : {AF_INET, AF_INET6}) {
    int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;  // no IPv6 on this node
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int rc = 0;
    if (family == AF_INET) {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<uint16_t>(port));
      a.sin_addr.s_addr = htonl(INADDR_ANY);
      rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    } else {
      int v6only = 1;
      ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_port = htons(static_cast<uint16_t>(port));
      a.sin6_addr = in6addr_any;
      rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    }
    const int err = errno;
    ::close(fd);
    if (rc != 0 && err == EADDRINUSE) {
      const std::string by = DescribePortHolders(FindPortHolders(port));
      return FailedPrecondition("env.MASTER_PORT: " + std::to_string(port) +
                                " is in use on this node" + (by.empty() ? "" : " (" + by + ")") +
                                "; the attempt must pick another");
    }
  }
  return Status::Ok();
}

}  // namespace

ProcessSupervisor::ProcessSupervisor(SupervisorOptions options)
    : options_(std::move(options)),
      base_env_(options_.base_env.value_or(launch::DefaultBaseEnv())) {
  monitor_ = std::thread([this] { MonitorLoop(); });
}

ProcessSupervisor::~ProcessSupervisor() {
  {
    MutexLock lock(mu_);
    shutting_down_ = true;
  }
  cv_.notify_all();
  monitor_.join();
}

Result<RecoveryReport> ProcessSupervisor::Recover() {
  RecoveryReport report;
  FileSystem& fs = *options_.fs;
  std::error_code ec;
  const auto jobs = options_.state_dir / "jobs";
  if (!std::filesystem::exists(jobs, ec)) return report;
  MutexLock lock(mu_);
  for (auto it = std::filesystem::recursive_directory_iterator(jobs, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() > 3) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->path().filename() != "worker.pid") continue;
    auto text = fs.ReadFile(it->path());
    Json j = text.ok() ? Json::parse(*text, nullptr, false) : Json();
    if (!j.is_object()) {
      fs.Remove(it->path()).IgnoreError();
      ++report.dropped;
      continue;
    }
    Worker w;
    try {
      w.key = WorkerKey{j.at("job_id").get<int64_t>(), j.at("attempt").get<int64_t>(),
                        j.at("rank").get<int64_t>()};
      w.pid = static_cast<pid_t>(j.at("pid").get<int64_t>());
      w.start_ticks = j.at("start_ticks").get<uint64_t>();
    } catch (const Json::exception&) {
      fs.Remove(it->path()).IgnoreError();
      ++report.dropped;
      continue;
    }
    w.paths = launch::RankPathsFor(options_.state_dir, w.key);
    if (workers_.count(w.key)) continue;
    if (auto code = ReadExitCode(fs, w.paths)) {
      w.state = WorkerState::kExited;
      w.exit_code = *code;
      workers_[w.key] = std::move(w);
      ++report.exited;
      continue;
    }
    auto stat = ReadProcStat(fs, w.pid);
    bool alive = w.pid > 0 && stat && stat->state != 'Z' && stat->start_ticks == w.start_ticks &&
                 !EnvironContradicts(fs, w.pid, IdentityEnv(w.key));
    if (alive) {
      w.is_child = false;
      w.state = WorkerState::kRunning;
      workers_[w.key] = std::move(w);
      ++report.adopted;
    } else {
      // The worker ended while no agent watched (or its pid was reused):
      // drop the pid file, remember the key as ended with the code its shim
      // recorded, or an unknown code.
      MarkExitedLocked(w, ReadShimExitCode(fs, w.paths).value_or(kExitCodeUnknown));
      fs.Remove(w.paths.pid).IgnoreError();
      workers_[w.key] = std::move(w);
      ++report.dropped;
    }
  }
  return report;
}

Status ProcessSupervisor::Start(const api::WorkerLaunch& launch, const launch::EnvMap& device_env) {
  MutexLock lock(mu_);
  return StartLocked(launch, device_env);
}

void ProcessSupervisor::RecordLaunchFailureLocked(const WorkerKey& key,
                                                  const launch::RankPaths& paths,
                                                  const std::string& reason) {
  AppendToLog(paths.log, "tessera-agent: cannot start " + KeyText(key) + ": " + reason);
  Worker w;
  w.key = key;
  w.paths = paths;
  MarkExitedLocked(w, kExitCodeLaunchFailed);
  workers_[key] = std::move(w);
}

Status ProcessSupervisor::StartLocked(const api::WorkerLaunch& launch,
                                      const launch::EnvMap& device_env) {
  const WorkerKey& key = launch.key;
  if (workers_.count(key)) return Status::Ok();  // never the same key twice
  const launch::RankPaths paths = launch::RankPathsFor(options_.state_dir, key);
  if (auto code = ReadExitCode(*options_.fs, paths)) {
    Worker w;
    w.key = key;
    w.paths = paths;
    w.state = WorkerState::kExited;
    w.exit_code = *code;
    workers_[key] = std::move(w);
    return FailedPrecondition(KeyText(key) + " already ran; not starting it again");
  }
  Result<Account> account = ResolveAccount(launch.run_as);
  launch::RankDirAccess dir_access;
  if (account.ok() && account->drop) dir_access = {true, account->gid};
  Status dir_made = launch::CreateRankDir(options_.state_dir, paths, dir_access);
  if (!dir_made.ok()) {
    // Without a rank dir there is nowhere to log; keep the record in memory.
    Worker w;
    w.key = key;
    w.paths = paths;
    w.state = WorkerState::kExited;
    w.exit_code = kExitCodeLaunchFailed;
    workers_[key] = std::move(w);
    return dir_made;
  }
  auto fail = [&](Status status) REQUIRES(mu_) {
    RecordLaunchFailureLocked(key, paths, status.ToString());
    return status.WithPrefix(KeyText(key));
  };
  if (!account.ok()) return fail(account.status());
  if (launch.argv.empty() || launch.argv[0].empty() || launch.argv[0][0] != '/') {
    return fail(InvalidArgument("argv[0] must be an absolute path", "argv[0]"));
  }
  // The controller refuses these at submission; an agent never trusts that
  // (a job queued before an upgrade, a controller of another version).
  for (const auto& [k, v] : launch.env) {
    if (api::IsDeniedEnvKey(k)) {
      return fail(InvalidArgument("may not be set by a job", "env." + k));
    }
  }
  if (Status port = CheckMasterPortFree(launch); !port.ok()) return fail(port);
  Status plan_written = WriteFileAtomically(*options_.fs, paths.plan, launch.plan.dump(2) + "\n");
  if (!plan_written.ok()) return fail(plan_written);
  // A rank that joins a running world finds its place at start.
  if (!launch.reform.is_null()) {
    Status written = WriteFileAtomically(*options_.fs, paths.reform, launch.reform.dump() + "\n");
    if (!written.ok()) return fail(written);
  }

  // The job's env is laid over a clean base env (not the agent's own), then
  // the node's device variables and Tessera's paths, which always win.
  launch::EnvMap env = base_env_;
  if (account->drop) {
    env["HOME"] = account->home;
    env["USER"] = account->name;
    env["LOGNAME"] = account->name;
  }
  for (const auto& [k, v] : launch.env) env[k] = v;
  for (const auto& [k, v] : device_env) env[k] = v;
  env["TESSERA_PLAN"] = paths.plan.string();
  env["TESSERA_PROGRESS_FILE"] = paths.progress.string();
  env["TESSERA_REFORM_FILE"] = paths.reform.string();
  for (const auto& [k, v] : IdentityEnv(key)) env[k] = v;  // identity for re-adoption
  if (!env.contains("RANK")) env["RANK"] = std::to_string(key.rank);

  {  // progress file exists before the worker runs, so tailing never races creation
    int fd = ::open(paths.progress.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
                    0600);
    // A worker of another account appends to it; the plan it only reads.
    if (fd >= 0 && account->drop && ::fchown(fd, account->uid, account->gid) != 0) {
      ::close(fd);
      return fail(Internal("cannot hand the progress file to " + account->name));
    }
    if (fd >= 0) ::close(fd);
    if (account->drop && (::chown(paths.plan.c_str(), 0, account->gid) != 0 ||
                          ::chmod(paths.plan.c_str(), 0640) != 0)) {
      return fail(Internal("cannot share the plan file with " + account->name));
    }
    if (account->drop && !launch.reform.is_null() &&
        (::chown(paths.reform.c_str(), 0, account->gid) != 0 ||
         ::chmod(paths.reform.c_str(), 0640) != 0)) {
      return fail(Internal("cannot share the reform file with " + account->name));
    }
  }
  int log_fd =
      ::open(paths.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (log_fd < 0) return fail(Internal("cannot open " + paths.log.string()));
  // The worker's shim (ProcessSpec::exit_code_file) records its exit code in
  // the rank folder, so an agent that re-adopts it still learns how it ended.
  ProcessSpec spec;
  spec.argv = launch.argv;
  spec.env.emplace();
  for (const auto& [k, v] : env) spec.env->push_back(k + "=" + v);
  spec.cwd = paths.dir.string();
  spec.stdin_from = ChildStdio::Null();
  spec.stdout_to = ChildStdio::Fd(log_fd);
  spec.stderr_to = ChildStdio::Fd(log_fd);
  spec.group = ChildProcessGroup::kNewSession;
  sigset_t none;
  sigemptyset(&none);
  spec.signal_mask = none;  // the agent blocks TERM/HUP
  spec.default_signal_handlers = true;
  spec.close_other_fds = true;
  spec.exit_code_file = "exit_code";
  if (account->drop) spec.run_as = ChildAccount{account->uid, account->gid, account->groups};
  Result<pid_t> started = options_.launcher->Launch(spec);
  ::close(log_fd);
  if (!started.ok()) return fail(started.status());
  const pid_t pid = *started;

  Worker w;
  w.key = key;
  w.paths = paths;
  w.pid = pid;
  w.is_child = true;
  w.state = WorkerState::kRunning;
  w.reform_generation =
      launch.reform.is_object() ? launch.reform.value("generation", int64_t{0}) : 0;
  if (auto stat = ReadProcStat(*options_.fs, pid)) w.start_ticks = stat->start_ticks;
  Json pid_record = {{"job_id", key.job_id},
                     {"attempt", key.attempt},
                     {"rank", key.rank},
                     {"pid", pid},
                     {"pgid", pid},
                     {"start_ticks", w.start_ticks},
                     {"started_ms", options_.clock->NowUnixMillis()},
                     {"argv", launch.argv},
                     {"device_indices", launch.device_indices}};
  Status recorded = WriteFileAtomically(*options_.fs, paths.pid, pid_record.dump(2) + "\n");
  workers_[key] = std::move(w);
  cv_.notify_all();
  if (!recorded.ok()) return recorded.WithPrefix("pid file (re-adoption will miss this worker)");
  return Status::Ok();
}

void ProcessSupervisor::Reject(const api::WorkerLaunch& launch, const Status& why) {
  MutexLock lock(mu_);
  if (workers_.count(launch.key)) return;
  const launch::RankPaths paths = launch::RankPathsFor(options_.state_dir, launch.key);
  launch::CreateRankDir(options_.state_dir, paths, {}).IgnoreError();
  RecordLaunchFailureLocked(launch.key, paths, why.ToString());
}

Status ProcessSupervisor::Reform(const api::WorkerLaunch& launch) {
  if (launch.reform.is_null()) return Status::Ok();
  const int64_t generation = launch.reform.value("generation", int64_t{0});
  MutexLock lock(mu_);
  auto it = workers_.find(launch.key);
  if (it == workers_.end() || it->second.state != WorkerState::kRunning) return Status::Ok();
  Worker& w = it->second;
  if (generation <= w.reform_generation) return Status::Ok();
  TESSERA_RETURN_IF_ERROR(
      WriteFileAtomically(*options_.fs, w.paths.reform, launch.reform.dump() + "\n"));
  // Shared with the worker's account exactly as its plan is.
  struct stat plan;
  if (::stat(w.paths.plan.c_str(), &plan) == 0 &&
      (::chown(w.paths.reform.c_str(), plan.st_uid, plan.st_gid) != 0 ||
       ::chmod(w.paths.reform.c_str(), plan.st_mode & 0777) != 0)) {
    return Internal("cannot share " + w.paths.reform.string() + " with the worker's account");
  }
  w.reform_generation = generation;
  return Status::Ok();
}

void ProcessSupervisor::Stop(const WorkerKey& key) {
  MutexLock lock(mu_);
  auto it = workers_.find(key);
  if (it == workers_.end() || it->second.state != WorkerState::kRunning) return;
  Worker& w = it->second;
  PollLocked(w);  // it may have ended just now; never signal a reaped pid
  if (w.state != WorkerState::kRunning) return;
  ::kill(-w.pid, SIGTERM);
  w.state = WorkerState::kStopping;
  w.kill_at = options_.clock->SteadyNow() + options_.stop_grace;
  cv_.notify_all();
}

void ProcessSupervisor::Forget(const WorkerKey& key) {
  MutexLock lock(mu_);
  auto it = workers_.find(key);
  if (it == workers_.end() || it->second.state != WorkerState::kExited) return;
  options_.fs->Remove(it->second.paths.pid).IgnoreError();  // exit.json and logs stay
  workers_.erase(it);
}

std::optional<api::WorkerStatus> ProcessSupervisor::Get(const WorkerKey& key) {
  MutexLock lock(mu_);
  auto it = workers_.find(key);
  if (it == workers_.end()) return std::nullopt;
  api::WorkerStatus s;
  s.key = key;
  s.pid = it->second.pid;
  s.state = it->second.state;
  s.exit_code = it->second.exit_code;
  return s;
}

std::optional<api::WorkerStatus> ProcessSupervisor::WaitForExit(const WorkerKey& key,
                                                                std::chrono::milliseconds timeout) {
  const auto deadline = options_.clock->SteadyNow() + timeout;
  while (true) {
    auto s = Get(key);
    if (!s || s->state == WorkerState::kExited) return s;
    if (options_.clock->SteadyNow() >= deadline) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::vector<api::WorkerStatus> ProcessSupervisor::Snapshot() {
  std::vector<std::pair<api::WorkerStatus, launch::RankPaths>> copies;
  {
    MutexLock lock(mu_);
    for (auto& [key, w] : workers_) {
      api::WorkerStatus s;
      s.key = key;
      s.pid = w.pid;
      s.state = w.state;
      s.exit_code = w.exit_code;
      copies.emplace_back(std::move(s), w.paths);
    }
  }
  std::vector<api::WorkerStatus> out;
  out.reserve(copies.size());
  for (auto& [s, paths] : copies) {  // file reads outside the lock
    s.progress = launch::ReadLastProgress(paths.progress);
    s.progress_lines = launch::ReadProgressLines(paths.progress, api::kMaxProgressLinesPerWorker);
    s.log_tail = launch::ReadLogTail(paths.log, 100);
    out.push_back(std::move(s));
  }
  return out;
}

bool ProcessSupervisor::StopAllAndWait() {
  std::vector<WorkerKey> keys;
  {
    MutexLock lock(mu_);
    for (const auto& [key, w] : workers_) keys.push_back(key);
  }
  for (const auto& key : keys) Stop(key);
  const auto deadline = options_.clock->SteadyNow() + options_.stop_grace +
                        std::chrono::seconds(2) + options_.poll_interval * 4;
  while (true) {
    {
      MutexLock lock(mu_);
      bool any = std::any_of(workers_.begin(), workers_.end(), [](const auto& kv) {
        return kv.second.state != WorkerState::kExited;
      });
      if (!any) return true;
    }
    if (options_.clock->SteadyNow() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void ProcessSupervisor::MarkExitedLocked(Worker& w, int64_t exit_code) {
  w.state = WorkerState::kExited;
  w.exit_code = exit_code;
  w.kill_at.reset();
  Json record = {{"exit_code", exit_code}, {"ended_ms", options_.clock->NowUnixMillis()}};
  Status recorded = WriteFileAtomically(*options_.fs, w.paths.exit, record.dump() + "\n");
  if (!recorded.ok()) {
    // Nobody to return it to (the monitor thread): the worker's log says it.
    AppendToLog(w.paths.log, "tessera-agent: cannot record the exit of " + KeyText(w.key) + ": " +
                                 recorded.ToString());
  }
}

void ProcessSupervisor::PollLocked(Worker& w) {
  if (w.state == WorkerState::kExited) return;
  bool ended = false;
  bool pid_reused = false;
  int64_t code = kExitCodeUnknown;
  if (w.is_child) {
    int status = 0;
    pid_t r = ::waitpid(w.pid, &status, WNOHANG);
    if (r == w.pid) {
      ended = true;
      code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    } else if (r < 0 && errno == ECHILD) {
      ended = true;  // reaped elsewhere; the status is lost
    }
  } else {
    auto stat = ReadProcStat(*options_.fs, w.pid);
    pid_reused = stat && stat->start_ticks != w.start_ticks;
    ended = !stat || stat->state == 'Z' || pid_reused;
    if (ended) code = ReadShimExitCode(*options_.fs, w.paths).value_or(kExitCodeUnknown);
  }
  if (ended) {
    // Whatever the leader left behind in its group ends with it (unless the
    // pid, and so perhaps the group id, now belongs to someone else).
    if (!pid_reused && GroupAlive(w.pid)) ::kill(-w.pid, SIGKILL);
    launch::RotateLogIfNeeded(w.paths.log, options_.log_max_bytes, options_.log_keep);
    MarkExitedLocked(w, code);
    return;
  }
  if (w.kill_at && options_.clock->SteadyNow() >= *w.kill_at) {
    ::kill(-w.pid, SIGKILL);
    w.kill_at.reset();
  }
}

void ProcessSupervisor::MonitorLoop() {
  MutexLock lock(mu_);
  while (!shutting_down_) {
    for (auto& [key, w] : workers_) {
      PollLocked(w);
      if (w.state != WorkerState::kExited) {
        launch::RotateLogIfNeeded(w.paths.log, options_.log_max_bytes, options_.log_keep);
      }
    }
    cv_.wait_for(mu_, options_.poll_interval);
  }
}

}  // namespace tessera::agent
