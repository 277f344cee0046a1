#include "scheduler/job_request.h"

#include "common/enum_names.h"

namespace tessera::scheduler {

namespace {

constexpr EnumName<JobKind> kJobKindNames[] = {
    {JobKind::kTrain, "train"},
    {JobKind::kInfer, "infer"},
};
static_assert(IsValidNameTable(kJobKindNames));

}  // namespace

std::string_view JobKindName(JobKind kind) { return NameOf(kJobKindNames, kind); }

std::optional<JobKind> ParseJobKind(std::string_view name) {
  return ParseName(kJobKindNames, name);
}

Status JobRequest::Validate() const {
  if (global_batch <= 0) return InvalidArgument("must be positive", "global_batch");
  if (min_devices < 1) return InvalidArgument("must be at least 1", "min_devices");
  if (max_devices < 0) return InvalidArgument("must be non-negative", "max_devices");
  if (max_devices != 0 && max_devices < min_devices) {
    return InvalidArgument("must be 0 or at least min_devices", "max_devices");
  }
  if (memory_reserve_fraction < 0 || memory_reserve_fraction >= 1) {
    return InvalidArgument("must be in [0, 1)", "memory_reserve_fraction");
  }
  if (image && (image->width <= 0 || image->height <= 0)) {
    return InvalidArgument("image size must be positive", "image");
  }
  if (layout == Layout::kTiled && kind != JobKind::kInfer) {
    return InvalidArgument("tiled layout is for inference only", "layout");
  }
  return Status::Ok();
}

}  // namespace tessera::scheduler
