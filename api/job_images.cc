#include "api/job_images.h"

#include <limits>
#include <string>

#include "api/job_spec_validation.h"
#include "common/quantities.h"

namespace tessera::api {

Result<std::optional<ImageExtent>> JobImages(const JobSpec& spec) {
  std::optional<ImageExtent> images;
  if (spec.image_width > 0 && spec.image_height > 0) {
    images = ImageExtent{spec.image_width, spec.image_height};
  }
  // A train job's square crop, against the profile's own (a builtin's is
  // measured at the worker's default crop, a model file's at the job's).
  if (const auto crop = BuiltinOptionValue(spec.args, "--image-size");
      crop && spec.kind == JobKind::kTrain) {
    const std::optional<int64_t> side = ParseWholeNumber(*crop);
    if (!side || *side < 1 || *side > std::numeric_limits<int>::max()) {
      return InvalidArgument("--image-size must be a positive whole number, got '" + *crop + "'",
                             "args");
    }
    images = ImageExtent{*side, *side};
  }
  return images;
}

}  // namespace tessera::api
