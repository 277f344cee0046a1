#include "daemon/controller/profile_cache.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "api/entrypoint_kind.h"
#include "common/atomic_file.h"
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
          launcher](const std::string& model) -> Result<std::string> {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return Unavailable("pipe failed");
    char err_path[] = "/tmp/tessera-profile-XXXXXX";
    int err_fd = ::mkstemp(err_path);
    ProcessSpec spec;
    // A second, small batch separates each layer's per-call cost from its
    // per-sample cost (small pipeline micro-batches pay the former more often).
    spec.argv = {binary, "profile", "--model", model, "--batch", "8", "--fixed-batch", "2"};
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
      return Unavailable("`" + binary + " profile --model " + model +
                         " --batch 8 --fixed-batch 2` failed: " +
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

ProfileCache::ProfileCache(fs::path dir, std::vector<std::string> models, ProfileSource source,
                           const Clock* clock, FileSystem* files)
    : dir_(std::move(dir)),
      models_(std::move(models)),
      source_(std::move(source)),
      clock_(clock != nullptr ? clock : SystemClock::Default()),
      files_(files != nullptr ? files : FileSystem::Default()) {}

ProfileCache::~ProfileCache() {
  if (warmup_.joinable()) warmup_.join();
}

void ProfileCache::StartWarmup() {
  MutexLock lock(mu_);
  if (warmup_.joinable()) return;
  warmup_ = std::thread([this] {
    for (const std::string& model : models_) {
      {
        MutexLock lock(mu_);
        measuring_ = model;
        measuring_since_ = clock_->SteadyNow();
      }
      bool measured = false;
      Result<scheduler::ModelProfile> p = Load(model, &measured);
      if (p.ok()) {
        spdlog::info("model profile ready: {} ({} layers)", model, p->layers.size());
      } else {
        spdlog::warn("model {} cannot be planned: {}", model, p.status().ToString());
      }
      MutexLock lock(mu_);
      if (measured) {
        measured_seconds_ +=
            std::chrono::duration<double>(clock_->SteadyNow() - measuring_since_).count();
        ++measured_count_;
      }
      measuring_.clear();
      ready_.insert_or_assign(model, std::move(p));
    }
  });
}

Result<scheduler::ModelProfile> ProfileCache::Load(const std::string& model, bool* measured) {
  fs::path file = dir_ / (model + ".json");
  std::string text;
  if (Result<std::string> cached = files_->ReadFile(file); cached.ok()) {
    text = *std::move(cached);
  } else {
    *measured = true;
    TESSERA_ASSIGN_OR_RETURN(text, source_(model));
    AtomicWriteOptions options;
    options.create_parent_dirs = true;
    if (Status kept = WriteFileAtomically(*files_, file, text, options); !kept.ok()) {
      // The measurement is good; only the next start pays for it again.
      spdlog::warn("profile of {} not cached (the next start measures it again): {}", model,
                   kept.ToString());
    }
  }
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Internal("profile of " + model + " is not JSON");
  return scheduler::ModelProfileFromWorkerJson(j);
}

Result<scheduler::ModelProfile> ProfileCache::Get(const std::string& model) {
  MutexLock lock(mu_);
  auto it = ready_.find(model);
  if (it != ready_.end()) return it->second;
  for (const auto& m : models_) {
    if (m == model) return MeasuringProfile(EtaSecondsLocked(model));
  }
  return NotFound("no builtin model \"" + model + "\"");
}

int64_t ProfileCache::EtaSecondsLocked(const std::string& model) const {
  const double each =
      measured_count_ > 0 ? measured_seconds_ / measured_count_ : kFirstProfileSeconds;
  double eta = 0;
  for (const std::string& m : models_) {  // the warm-up measures in this order
    if (ready_.contains(m)) continue;
    if (m == measuring_) {
      const double took =
          std::chrono::duration<double>(clock_->SteadyNow() - measuring_since_).count();
      eta += std::max(1.0, each - took);
    } else {
      eta += each;
    }
    if (m == model) break;
  }
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(eta)));
}

}  // namespace tessera::daemon
