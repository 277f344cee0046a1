#include "worker/runtime/resume.h"

#include <cstdio>
#include <exception>
#include <filesystem>
#include <mutex>
#include <set>
#include <utility>

namespace tessera::worker {

torch::Tensor GetCpuRngState() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void SetCpuRngState(const torch::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

Result<std::vector<std::string>> ResumeTensorNames(const Manifest& manifest,
                                                   const std::vector<std::string>& state_names) {
  TESSERA_ASSIGN_OR_RETURN(auto locations, TensorLocations(manifest));
  std::set<std::string> available;
  for (auto& [n, f] : locations) available.insert(n);
  std::vector<std::string> wanted;
  for (const std::string& n : state_names) {
    if (available.contains(n)) wanted.push_back(n);
  }
  for (const std::string& n : state_names) {
    for (auto it = available.lower_bound(n + "#");
         it != available.end() && it->starts_with(n + "#"); ++it) {
      wanted.push_back(*it);
    }
  }
  if (available.contains(kRngTensor)) wanted.push_back(kRngTensor);
  return wanted;
}

namespace {

// Reads `manifest`'s tensors for `state_names` into read->tensors.
void ReadTensors(const std::string& dir, const Manifest& manifest,
                 const std::vector<std::string>& state_names, CheckpointRead* read) {
  Result<std::vector<std::string>> names = ResumeTensorNames(manifest, state_names);
  read->tensors = names.ok() ? LoadTensors(dir, manifest, *names)
                             : Result<std::map<std::string, torch::Tensor>>(names.status());
}

std::vector<std::string> NamesOf(const NamedTensors& tensors) {
  std::vector<std::string> names;
  for (const auto& [n, t] : tensors) names.push_back(n);
  return names;
}

}  // namespace

CheckpointRead ReadNewestCheckpoint(const std::string& dir,
                                    const std::vector<std::string>& state_names) {
  CheckpointRead read;
  try {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    read.manifest = FindNewestCheckpoint(dir, &read.skipped);
    if (read.manifest) ReadTensors(dir, *read.manifest, state_names, &read);
  } catch (const std::exception& e) {
    read.tensors = Internal(std::string("reading the checkpoint: ") + e.what());
  }
  return read;
}

Result<std::optional<ResumePoint>> ResumeFromCheckpoint(
    Collectives& world, const std::string& dir, const std::string& model, CheckpointRead read,
    const NamedTensors& state, const std::vector<NamedOptimizer*>& optimizers) {
  int64_t chosen = -1;
  if (world.rank() == 0) {
    for (const auto& why : read.skipped)
      std::fprintf(stderr, "checkpoint skipped: %s\n", why.c_str());
    if (read.manifest) chosen = read.manifest->step;
  }
  TESSERA_ASSIGN_OR_RETURN(chosen, ShareResumeStep(world, chosen));
  if (chosen < 0) return std::optional<ResumePoint>();
  if (!read.manifest || read.manifest->step != chosen) {
    // A checkpoint completed between rank 0's read and this rank's.
    TESSERA_ASSIGN_OR_RETURN(Manifest m, ReadManifest(dir, chosen));
    read.manifest = std::move(m);
    try {
      ReadTensors(dir, *read.manifest, NamesOf(state), &read);
    } catch (const std::exception& e) {
      read.tensors = Internal(std::string("reading the checkpoint: ") + e.what());
    }
  }
  const Manifest& m = *read.manifest;
  if (m.model != model) {
    return FailedPrecondition("checkpoint " + StepDirName(chosen) + " is of model \"" + m.model +
                              "\", not \"" + model + "\"");
  }
  if (!read.tensors.ok()) return read.tensors.status();
  const std::map<std::string, torch::Tensor>& loaded = *read.tensors;
  torch::NoGradGuard no_grad;
  for (const auto& [name, tensor] : state) {
    auto it = loaded.find(name);
    if (it == loaded.end()) {
      return FailedPrecondition("checkpoint " + StepDirName(chosen) + " has no tensor " + name);
    }
    if (it->second.sizes() != tensor.sizes()) {
      return FailedPrecondition("checkpoint tensor " + name + " has another shape than the model");
    }
    // NamedTensors hold handles to the model's own tensors: copy_ restores them in place.
    torch::Tensor target = tensor;
    target.copy_(it->second.to(target.device()));
  }
  for (NamedOptimizer* optimizer : optimizers) optimizer->LoadState(loaded);
  if (auto rng = loaded.find(kRngTensor); rng != loaded.end()) SetCpuRngState(rng->second);
  std::fprintf(stderr, "rank %d resumed from %s (%zu tensors)\n", world.rank(),
               StepDirName(m.step).c_str(), loaded.size());
  return std::optional<ResumePoint>(ResumePoint{m.step, m.samples_seen, loaded.size()});
}

}  // namespace tessera::worker
