// JobImages: the images tesserad plans a job at, read from its spec: an infer
// job's image_width x image_height, a training job's --image-size crop (a
// square, its argument to the worker); none when the spec names neither (the
// model profile's own images). The planner scales the profile's FLOPs and
// activations by their pixels (daemon/controller/planning.h); the scheduler
// simulator's traces carry the same (cli/trace_export.h).
//
// Thread safety: pure function.
#ifndef TESSERA_API_JOB_IMAGES_H_
#define TESSERA_API_JOB_IMAGES_H_

#include <cstdint>
#include <optional>

#include "api/types.h"
#include "common/status.h"

namespace tessera::api {

struct ImageExtent {
  int64_t width = 0;
  int64_t height = 0;
};

// kInvalidArgument (field "args") when a training job's --image-size is not a
// whole number from 1 to INT_MAX.
Result<std::optional<ImageExtent>> JobImages(const JobSpec& spec);

}  // namespace tessera::api

#endif  // TESSERA_API_JOB_IMAGES_H_
