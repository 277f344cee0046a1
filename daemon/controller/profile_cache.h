// ProfileCache: the measured ModelProfile of every builtin model, so plans
// cut the model exactly where the worker's layers are, and of the exported
// TorchScript sequences a lab trains through `model:` entrypoints, measured
// when a job first needs one.
//
// Profiles come from `tessera-worker profile <target's args>` (run by a
// ProfileSource; daemon/controller/profile_target.h), are cached as JSON in a
// folder (so a restart does not profile again; written atomically through a
// FileSystem, common/atomic_file.h), and are converted with
// scheduler::ModelProfileFromWorkerJson. A profile that cannot be cached (the
// write fails) is still used; the failure is logged as a warning naming the
// file, and the next start measures it again.
//
// One background thread measures, one target at a time, in the order asked:
// StartWarmup() queues every builtin model; Get of a model file not measured
// yet queues it (and starts the thread). Until a target's profile is ready
// Get answers MeasuringProfile(eta), so its jobs stay pending (their reason
// says how long) instead of blocking the control loop, and a dry run answers
// that state (MeasuringProfileAnswer). The estimate is the mean time of the
// measurements so far (30 s before the first) for the target and those
// queued before it, less what the current one already took.
//
// A profile whose repeats disagree (the worker's repeat_spread, slowest minus
// fastest over the median, above kMaxRepeatSpread: the host was busy for part
// of it) is measured again, up to kMaxMeasurements times; the steadiest is
// kept, and each disagreement is logged as a warning.
//
// A profile that running jobs' steps contradict is measured again on request
// (Remeasure): the profile in use stays until the new one is ready, then the
// new one replaces it and its cache file; a failed measurement keeps the old
// one. At most kMaxRemeasures times per target in a process, so a host that
// always skews it does not keep the thread busy.
//
// A model file's profile is keyed by its path, the target's options, and the
// file's size and modification time: a file replaced in place is measured
// again. A file that cannot be read (stat fails) answers that error at once;
// one that fails to profile keeps its error until the file changes.
//
// Ownership: owns its thread (stopped and joined by the destructor, after the
// measurement under way).
// Thread safety: Get and StartWarmup may be called from any thread.
#ifndef TESSERA_DAEMON_CONTROLLER_PROFILE_CACHE_H_
#define TESSERA_DAEMON_CONTROLLER_PROFILE_CACHE_H_

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "api/types.h"
#include "common/clock.h"
#include "common/file_system.h"
#include "common/mutex.h"
#include "common/process_launcher.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "daemon/controller/profile_target.h"
#include "scheduler/model_profile.h"

namespace tessera::daemon {

// What a profile lookup answers while the model's profile is being measured:
// kUnavailable, field "profile", "measuring the model profile (about N s)".
Status MeasuringProfile(int64_t eta_s);
bool IsMeasuringProfile(const Status& status);
// A dry run's answer in that state (a state, not an error; api/router.cc
// sends it with 202 and Retry-After): {"state": "measuring_profile",
// "message": the status' message, "retry_after_s": seconds to ask again}.
api::Json MeasuringProfileAnswer(const Status& status);

// The builtin models tesserad profiles: every "builtin:<model>" of
// kBuiltinEntrypoints (daemon/store/store.h), in that order, so no builtin entrypoint
// is left without a plan.
std::vector<std::string> BuiltinModelsToProfile();

// Produces the worker's profile JSON text for a target.
using ProfileSource = std::function<Result<std::string>(const ProfileTarget& target)>;

// Runs `<worker_binary> profile <target.WorkerArgs()> --batch 8 --fixed-batch 2`
// (through `launcher`, not owned; the child gets SIGKILL when tesserad dies)
// and returns its stdout. kUnavailable when it cannot run or exits non-zero
// (stderr in the message).
ProfileSource WorkerProfileSource(std::string worker_binary,
                                  ProcessLauncher* launcher = ProcessLauncher::Default());

class ProfileCache {
 public:
  static constexpr double kMaxRepeatSpread = 0.25;
  static constexpr int kMaxMeasurements = 3;
  static constexpr int kMaxRemeasures = 1;

  // models: the builtin models StartWarmup measures, in order.
  // clock: times the measurements for the estimate (nullptr: the system clock).
  // files: reads and writes the cache folder, tells a model file's size and
  // time (nullptr: the real file system).
  ProfileCache(std::filesystem::path dir, std::vector<std::string> models, ProfileSource source,
               const Clock* clock = nullptr, FileSystem* files = nullptr);
  ~ProfileCache();
  ProfileCache(const ProfileCache&) = delete;
  ProfileCache& operator=(const ProfileCache&) = delete;

  // Queues the builtin models not measured yet and starts the thread. Idempotent.
  void StartWarmup() EXCLUDES(mu_);

  // The profile of a builtin model ("colorize-unet"): MeasuringProfile(eta)
  // while it is being measured or waits its turn, the measuring error if it
  // failed, kNotFound for other names.
  Result<scheduler::ModelProfile> Get(const std::string& model) EXCLUDES(mu_);

  // The profile of `target`: a builtin as above; a model file's, measured on
  // first ask (MeasuringProfile(eta) until then), or the error of its stat
  // or of its measurement.
  Result<scheduler::ModelProfile> Get(const ProfileTarget& target) EXCLUDES(mu_);

  // Queues `target`'s profile to be measured again (see the file comment;
  // `why` goes to the log). False, queuing nothing, when it has no profile in
  // use, is queued or being measured, or was measured again kMaxRemeasures
  // times already.
  bool Remeasure(const ProfileTarget& target, const std::string& why) EXCLUDES(mu_);

 private:
  struct Queued {
    std::string key;  // the cache file's stem
    ProfileTarget target;
    bool again = false;  // Remeasure: measure, whatever the cache file holds
  };
  void Run() EXCLUDES(mu_);
  // The target's cache key: the builtin's name, or a model file's path,
  // options, size and time (kFailedPrecondition when it cannot be read).
  Result<std::string> KeyOf(const ProfileTarget& target) EXCLUDES(mu_);
  void StartThreadLocked() REQUIRES(mu_);
  // The source's text, measured again while its repeats disagree.
  Result<std::string> MeasureSteady(const ProfileTarget& target);
  // *measured: whether it ran the source (not the cached file).
  Result<scheduler::ModelProfile> Load(const Queued& q, bool* measured);
  int64_t EtaSecondsLocked(const std::string& key) const REQUIRES(mu_);
  bool IsBuiltin(const std::string& model) const;

  const std::filesystem::path dir_;
  const std::vector<std::string> models_;
  const ProfileSource source_;
  const Clock* const clock_;
  FileSystem* const files_;
  Mutex mu_;
  std::condition_variable_any cv_;  // with mu_: work queued, or stopping
  std::map<std::string, Result<scheduler::ModelProfile>> ready_ GUARDED_BY(mu_);  // by key
  std::map<std::string, int> remeasured_ GUARDED_BY(mu_);  // by key: Remeasure's queued
  std::deque<Queued> queue_ GUARDED_BY(mu_);
  bool warmup_queued_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::string measuring_ GUARDED_BY(mu_);  // the key being measured now, or ""
  std::chrono::steady_clock::time_point measuring_since_ GUARDED_BY(mu_);
  double measured_seconds_ GUARDED_BY(mu_) = 0;  // total time of the measurements so far
  int measured_count_ GUARDED_BY(mu_) = 0;
  std::thread thread_ GUARDED_BY(mu_);  // the destructor joins it
};

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_CONTROLLER_PROFILE_CACHE_H_
