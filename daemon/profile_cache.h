// ProfileCache: the measured ModelProfile of every builtin model, so plans
// cut the model exactly where the worker's layers are.
//
// Profiles come from `tessera-worker profile --model <name>` (run by a
// ProfileSource), are cached as JSON in a folder (so a restart does not
// profile again), and are converted with scheduler::ModelProfileFromWorkerJson.
// StartWarmup() profiles every builtin model on a background thread; until a
// model's profile is ready Get answers kUnavailable, so its jobs stay
// pending instead of blocking the control loop.
//
// Ownership: owns its warm-up thread (joined by the destructor).
// Thread safety: Get and StartWarmup may be called from any thread.
#ifndef TESSERA_DAEMON_PROFILE_CACHE_H_
#define TESSERA_DAEMON_PROFILE_CACHE_H_

#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "scheduler/model_profile.h"

namespace tessera::daemon {

// Produces the worker's profile JSON text for a model.
using ProfileSource = std::function<Result<std::string>(const std::string& model)>;

// Runs `<worker_binary> profile --model <model>` and returns its stdout.
// kUnavailable when it cannot run or exits non-zero (stderr in the message).
ProfileSource WorkerProfileSource(std::string worker_binary);

class ProfileCache {
 public:
  ProfileCache(std::filesystem::path dir, std::vector<std::string> models, ProfileSource source);
  ~ProfileCache();
  ProfileCache(const ProfileCache&) = delete;
  ProfileCache& operator=(const ProfileCache&) = delete;

  // Starts profiling the models not cached yet. Idempotent.
  void StartWarmup();

  // The profile of `model` ("colorize-unet"): kUnavailable while it is being
  // measured, the measuring error if it failed, kNotFound for other names.
  Result<scheduler::ModelProfile> Get(const std::string& model);

 private:
  Result<scheduler::ModelProfile> Load(const std::string& model);

  const std::filesystem::path dir_;
  const std::vector<std::string> models_;
  const ProfileSource source_;
  std::mutex mu_;
  std::map<std::string, Result<scheduler::ModelProfile>> ready_;
  std::thread warmup_;
};

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_PROFILE_CACHE_H_
