// ProfileTarget: what tesserad measures to plan a job by its layers: a builtin
// model by name, or a lab's exported TorchScript sequence of layers (the file
// a `model:` entrypoint registers) with the job's options that shape what its
// layers cost.
//
// The worker measures either (`tessera-worker profile <WorkerArgs()> ...`,
// daemon/controller/profile_cache.h). A file's profile depends on the file
// itself (ProfileCache tells a replaced file by its size and modification
// time), on the image convention (the channels in), the crop size
// (`--image-size`) and the loss; options holds those as worker flags.
//
// Thread safety: plain values; pure functions.
#ifndef TESSERA_DAEMON_CONTROLLER_PROFILE_TARGET_H_
#define TESSERA_DAEMON_CONTROLLER_PROFILE_TARGET_H_

#include <string>
#include <vector>

#include "api/types.h"

namespace tessera::daemon {

struct ProfileTarget {
  std::string model;                 // a builtin model ("colorize-unet"); empty for a file
  std::string model_file;            // an exported sequence's path; empty for a builtin
  std::vector<std::string> options;  // a file's worker flags, in a fixed order

  bool is_file() const { return !model_file.empty(); }
  // "colorize-unet", or "model file /srv/models/seq.pt" (for messages).
  std::string Describe() const;
  // {"--model", model}, or {"--model-file", model_file, options...}.
  std::vector<std::string> WorkerArgs() const;

  friend bool operator==(const ProfileTarget&, const ProfileTarget&) = default;
};

ProfileTarget BuiltinTarget(std::string model);

// The target of a `model:` entrypoint's train job whose registered file is
// `model_file`: the spec's image convention (api::ImageConventionArgs less
// --align-px and --halo-px, which only inference uses), then
// the --image-size and --loss its args give (the worker's defaults when
// absent). REQUIRES: api::ValidateJobSpec(spec) passed.
ProfileTarget ModelFileTarget(const api::JobSpec& spec, std::string model_file);

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_CONTROLLER_PROFILE_TARGET_H_
