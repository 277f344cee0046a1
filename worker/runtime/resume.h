// Resume: how a rank takes up training from the newest complete checkpoint.
// The one resume path of every trainer (trainer.h, gan_trainer.h).
//
// A rank's training state is
//   - its state tensors: the parameters and buffers it owns, by name
//     ("<layer>.<param>");
//   - its optimizers' state, "<param>#<slot>" (optimizer.h);
//   - the CPU random generator, kRngTensor;
//   - the step and the samples seen, from the manifest.
// ReadNewestCheckpoint reads this rank's tensors of the newest complete
// checkpoint (it touches no collective, so a trainer may run it while the
// ranks rendezvous); ResumeFromCheckpoint agrees with the other ranks on the
// checkpoint (rank 0's pick), and restores the state from it.
//
// Error convention: a checkpoint that does not fit the model is
// kFailedPrecondition (it was found; it does not fit): one of another model,
// one lacking a state tensor of this rank ("checkpoint step-N has no tensor
// <name>"), one holding a state tensor of another shape ("checkpoint tensor
// <name> has another shape than the model"). Unreadable or damaged files keep
// their own codes (checkpoint.h). On error the state may be partly restored;
// the trainer stops.
//
// Thread safety: ReadNewestCheckpoint may run on any thread;
// ResumeFromCheckpoint on the rank's own, like every collective.
#ifndef TESSERA_WORKER_RUNTIME_RESUME_H_
#define TESSERA_WORKER_RUNTIME_RESUME_H_

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/runtime/checkpoint.h"
#include "worker/runtime/collectives.h"
#include "worker/runtime/manifest.h"
#include "worker/runtime/optimizer.h"

namespace tessera::worker {

// The name of the CPU random generator's state in a checkpoint.
inline constexpr char kRngTensor[] = "__rng__.cpu";
torch::Tensor GetCpuRngState();
void SetCpuRngState(const torch::Tensor& state);

// The tensors a rank with `state_names` reads from `manifest`: those of its
// state tensors the checkpoint holds, every "<name>#<slot>" of them, and
// kRngTensor when present. kInvalidArgument for a malformed manifest.
Result<std::vector<std::string>> ResumeTensorNames(const Manifest& manifest,
                                                   const std::vector<std::string>& state_names);

// A rank's read of the newest complete checkpoint in a directory.
struct CheckpointRead {
  std::optional<Manifest> manifest;  // nullopt: none
  std::vector<std::string> skipped;  // why other checkpoints were not picked
  Result<std::map<std::string, torch::Tensor>> tensors = Internal("not read");
};

// Creates `dir` if needed and reads the newest complete checkpoint's tensors
// for `state_names` (ResumeTensorNames). Never throws: failures land in
// `tensors`.
CheckpointRead ReadNewestCheckpoint(const std::string& dir,
                                    const std::vector<std::string>& state_names);

// Where a resumed rank continues.
struct ResumePoint {
  int64_t step = 0;
  int64_t samples_seen = 0;
  size_t tensors = 0;  // tensors read from the checkpoint
};

// Collective over `world`: every rank resumes from rank 0's newest complete
// checkpoint (rank 0 prints why others were skipped); a rank whose `read`
// found another step reads the agreed one. Copies each of `state` from it
// (the tensors keep their devices), loads every optimizer's state and the
// RNG. nullopt when there is no checkpoint. Errors: see the convention above.
// REQUIRES: `read` is ReadNewestCheckpoint(dir, names of `state`);
// `optimizers` are not null.
Result<std::optional<ResumePoint>> ResumeFromCheckpoint(
    Collectives& world, const std::string& dir, const std::string& model, CheckpointRead read,
    const NamedTensors& state, const std::vector<NamedOptimizer*>& optimizers);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_RESUME_H_
