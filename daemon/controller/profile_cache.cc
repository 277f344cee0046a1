#include "daemon/controller/profile_cache.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "api/entrypoint_kind.h"
#include "common/atomic_file.h"
#include "common/hex.h"
#include "common/process_launcher.h"
#include "daemon/store/store.h"
#include "scheduler/profile_json.h"

namespace tessera::daemon {
namespace fs = std::filesystem;

std::vector<std::string> BuiltinModelsToProfile() {
  std::vector<std::string> models;
  for (std::string_view name : kBuiltinEntrypoints) {
    if (api::EntrypointKindOf(name) == api::EntrypointKind::kBuiltin) {
      models.emplace_back(api::EntrypointId(name));
    }
  }
  return models;
}

ProfileSource WorkerProfileSource(std::string worker_binary, ProcessLauncher* launcher) {
  return [binary = std::move(worker_binary),
          launcher](const ProfileTarget& target) -> Result<std::string> {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return Unavailable("pipe failed");
    char err_path[] = "/tmp/tessera-profile-XXXXXX";
    int err_fd = ::mkstemp(err_path);
    ProcessSpec spec;
    // A second, small batch separates each layer's per-call cost from its
    // per-sample cost (small pipeline micro-batches pay the former more often).
    spec.argv = {binary, "profile"};
    for (const std::string& a : target.WorkerArgs()) spec.argv.push_back(a);
    spec.argv.insert(spec.argv.end(), {"--batch", "8", "--fixed-batch", "2"});
    spec.stdout_to = ChildStdio::Fd(out[1]);
    if (err_fd >= 0) spec.stderr_to = ChildStdio::Fd(err_fd);
    // The profile is for this tesserad alone: it ends with it (a killed tesserad
    // left its profiling workers running, each on a core, for up to minutes).
    spec.parent_death_signal = SIGKILL;
    // Inherit nothing else: above all not the daemon's listening socket,
    // which would keep the port taken if the daemon died first.
    spec.close_other_fds = true;
    spec.on_start_failure = StartFailure::kExitInChild;  // exit 127: reported below
    Result<pid_t> started = launcher->Launch(spec);
    if (!started.ok()) {
      ::close(out[0]);
      ::close(out[1]);
      if (err_fd >= 0) {
        ::close(err_fd);
        ::unlink(err_path);
      }
      return Unavailable(started.status().message());
    }
    const pid_t pid = *started;
    ::close(out[1]);
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(out[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
    ::close(out[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    std::string err;
    if (err_fd >= 0) {
      err = FileSystem::Default()->ReadFile(err_path).value_or(std::string());
      ::close(err_fd);
      ::unlink(err_path);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::string command;
      for (const std::string& a : spec.argv) command += (command.empty() ? "" : " ") + a;
      return Unavailable("`" + command + "` failed: " +
                         (err.empty() ? "exit status " + std::to_string(status) : err));
    }
    return text;
  };
}

namespace {
constexpr double kFirstProfileSeconds = 30;  // the estimate before any measurement
}  // namespace

Status MeasuringProfile(int64_t eta_s) {
  return Status(StatusCode::kUnavailable,
                "measuring the model profile (about " + std::to_string(eta_s) + " s)", "profile");
}

bool IsMeasuringProfile(const Status& status) {
  return status.code() == StatusCode::kUnavailable && status.field() == "profile";
}

api::Json MeasuringProfileAnswer(const Status& status) {
  // Ask again soon: the estimate is rough, and a cached profile is ready at once.
  return api::Json{
      {"state", "measuring_profile"}, {"message", status.message()}, {"retry_after_s", 2}};
}

namespace {

// The cache file's stem of a model file's profile: its path, options, size
// and modification time, hashed (a replaced file gets another).
std::string FileKey(const ProfileTarget& target, const FileStat& stat) {
  std::string text = target.model_file;
  for (const std::string& o : target.options) text += '\0' + o;
  text += '\0' + std::to_string(stat.size_bytes) + '\0' + std::to_string(stat.modified_ns);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha256(), nullptr);
  return "file-" + HexEncode(digest, std::min(len, 12u));
}

}  // namespace

ProfileCache::ProfileCache(fs::path dir, std::vector<std::string> models, ProfileSource source,
                           const Clock* clock, FileSystem* files)
    : dir_(std::move(dir)),
      models_(std::move(models)),
      source_(std::move(source)),
      clock_(clock != nullptr ? clock : SystemClock::Default()),
      files_(files != nullptr ? files : FileSystem::Default()) {}

ProfileCache::~ProfileCache() {
  std::thread thread;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    thread = std::move(thread_);
  }
  cv_.notify_all();
  if (thread.joinable()) thread.join();
}

bool ProfileCache::IsBuiltin(const std::string& model) const {
  return std::find(models_.begin(), models_.end(), model) != models_.end();
}

void ProfileCache::StartThreadLocked() {
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  cv_.notify_all();
}

void ProfileCache::StartWarmup() {
  MutexLock lock(mu_);
  if (warmup_queued_) return;
  warmup_queued_ = true;
  // Builtins first: every builtin job waits on them.
  std::deque<Queued> builtins;
  for (const std::string& model : models_) {
    if (!ready_.contains(model)) builtins.push_back({model, BuiltinTarget(model)});
  }
  queue_.insert(queue_.begin(), builtins.begin(), builtins.end());
  StartThreadLocked();
}

void ProfileCache::Run() {
  while (true) {
    Queued q;
    {
      MutexLock lock(mu_);
      while (!stopping_ && queue_.empty()) cv_.wait(mu_);
      if (stopping_) return;
      q = std::move(queue_.front());
      queue_.pop_front();
      measuring_ = q.key;
      measuring_since_ = clock_->SteadyNow();
    }
    bool measured = false;
    Result<scheduler::ModelProfile> p = Load(q, &measured);
    if (p.ok()) {
      spdlog::info("model profile {}: {} ({} layers)", q.again ? "measured again" : "ready",
                   q.target.Describe(), p->layers.size());
    } else if (q.again) {
      spdlog::warn("profile of {} not measured again (the one in use stays): {}",
                   q.target.Describe(), p.status().ToString());
    } else {
      spdlog::warn("{} cannot be planned by its layers: {}", q.target.Describe(),
                   p.status().ToString());
    }
    MutexLock lock(mu_);
    if (measured) {
      measured_seconds_ +=
          std::chrono::duration<double>(clock_->SteadyNow() - measuring_since_).count();
      ++measured_count_;
    }
    measuring_.clear();
    if (p.ok() || !q.again) ready_.insert_or_assign(q.key, std::move(p));
  }
}

Result<scheduler::ModelProfile> ProfileCache::Load(const Queued& q, bool* measured) {
  fs::path file = dir_ / (q.key + ".json");
  const std::string what = q.target.Describe();
  std::string text;
  Result<std::string> cached =
      q.again ? Result<std::string>(NotFound("measured again")) : files_->ReadFile(file);
  if (cached.ok()) {
    text = *std::move(cached);
  } else {
    *measured = true;
    TESSERA_ASSIGN_OR_RETURN(text, MeasureSteady(q.target));
    AtomicWriteOptions options;
    options.create_parent_dirs = true;
    if (Status kept = WriteFileAtomically(*files_, file, text, options); !kept.ok()) {
      // The measurement is good; only the next start pays for it again.
      spdlog::warn("profile of {} not cached (the next start measures it again): {}", what,
                   kept.ToString());
    }
  }
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Internal("profile of " + what + " is not JSON");
  return scheduler::ModelProfileFromWorkerJson(j);
}

Result<std::string> ProfileCache::MeasureSteady(const ProfileTarget& target) {
  std::string best;
  double best_spread = 0;
  for (int i = 0; i < kMaxMeasurements; ++i) {
    TESSERA_ASSIGN_OR_RETURN(std::string text, source_(target));
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    const double spread =
        j.is_object() && j.contains("repeat_spread") && j["repeat_spread"].is_number()
            ? j["repeat_spread"].get<double>()
            : 0.0;
    if (best.empty() || spread < best_spread) {
      best = std::move(text);
      best_spread = spread;
    }
    if (best_spread <= kMaxRepeatSpread) break;
    spdlog::warn("profile of {}: its repeats disagree by {:.0f} % (the host was busy?){}",
                 target.Describe(), spread * 100,
                 i + 1 < kMaxMeasurements ? "; measuring it again" : "; keeping the steadiest");
  }
  return best;
}

Result<scheduler::ModelProfile> ProfileCache::Get(const std::string& model) {
  return Get(BuiltinTarget(model));
}

Result<std::string> ProfileCache::KeyOf(const ProfileTarget& target) {
  if (!target.is_file()) return target.model;
  // Outside the lock: a stat of a slow (network) file system.
  Result<FileStat> stat = files_->Stat(target.model_file);
  if (!stat.ok()) {
    return FailedPrecondition("cannot profile " + target.Describe() + ": " +
                              stat.status().message());
  }
  return FileKey(target, *stat);
}

bool ProfileCache::Remeasure(const ProfileTarget& target, const std::string& why) {
  Result<std::string> key = KeyOf(target);
  if (!key.ok()) return false;
  MutexLock lock(mu_);
  auto ready = ready_.find(*key);
  if (ready == ready_.end() || !ready->second.ok() || *key == measuring_ ||
      std::any_of(queue_.begin(), queue_.end(), [&](const Queued& q) { return q.key == *key; }) ||
      remeasured_[*key] >= kMaxRemeasures) {
    return false;
  }
  ++remeasured_[*key];
  spdlog::warn("profile of {}: measuring it again ({})", target.Describe(), why);
  queue_.push_back({*key, target, /*again=*/true});
  StartThreadLocked();
  return true;
}

Result<scheduler::ModelProfile> ProfileCache::Get(const ProfileTarget& target) {
  TESSERA_ASSIGN_OR_RETURN(std::string key, KeyOf(target));
  MutexLock lock(mu_);
  auto it = ready_.find(key);
  if (it != ready_.end()) return it->second;
  if (!target.is_file()) {
    if (IsBuiltin(target.model)) return MeasuringProfile(EtaSecondsLocked(key));
    return NotFound("no builtin model \"" + target.model + "\"");
  }
  const bool queued =
      key == measuring_ ||
      std::any_of(queue_.begin(), queue_.end(), [&](const Queued& q) { return q.key == key; });
  if (!queued) {
    queue_.push_back({key, target});
    StartThreadLocked();
  }
  return MeasuringProfile(EtaSecondsLocked(key));
}

int64_t ProfileCache::EtaSecondsLocked(const std::string& key) const {
  const double each =
      measured_count_ > 0 ? measured_seconds_ / measured_count_ : kFirstProfileSeconds;
  double eta = 0;
  if (!measuring_.empty()) {
    const double took =
        std::chrono::duration<double>(clock_->SteadyNow() - measuring_since_).count();
    eta += std::max(1.0, each - took);
  }
  if (key != measuring_) {
    // The measurement order: the queue, then (before StartWarmup) the builtins.
    std::vector<std::string> order;
    for (const Queued& q : queue_) order.push_back(q.key);
    if (!warmup_queued_) order.insert(order.end(), models_.begin(), models_.end());
    for (const std::string& k : order) {
      if (ready_.contains(k)) continue;
      eta += each;
      if (k == key) break;
    }
  }
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(eta)));
}

}  // namespace tessera::daemon
