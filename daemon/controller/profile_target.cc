#include "daemon/controller/profile_target.h"

#include <utility>

#include "api/image_convention.h"
#include "api/job_spec_validation.h"

namespace tessera::daemon {

std::string ProfileTarget::Describe() const {
  return is_file() ? "model file " + model_file : model;
}

std::vector<std::string> ProfileTarget::WorkerArgs() const {
  if (!is_file()) return {"--model", model};
  std::vector<std::string> args = {"--model-file", model_file};
  args.insert(args.end(), options.begin(), options.end());
  return args;
}

ProfileTarget BuiltinTarget(std::string model) {
  ProfileTarget t;
  t.model = std::move(model);
  return t;
}

ProfileTarget ModelFileTarget(const api::JobSpec& spec, std::string model_file) {
  ProfileTarget t;
  t.model_file = std::move(model_file);
  // The members that change what the layers take; align and halo are for
  // inference tiles.
  const std::vector<std::string> image = api::ImageConventionArgs(spec.image);
  for (size_t i = 0; i < image.size(); ++i) {
    if (image[i] == "--align-px" || image[i] == "--halo-px") {
      ++i;  // and its value
      continue;
    }
    t.options.push_back(image[i]);
  }
  for (const char* name : {"--image-size", "--loss"}) {
    if (auto value = api::BuiltinOptionValue(spec.args, name)) {
      t.options.insert(t.options.end(), {name, *value});
    }
  }
  return t;
}

}  // namespace tessera::daemon
