// JobRequest: what a job asks of the planner.
//
// Purpose: train or infer, the global batch, device-count bounds and the layout
// (auto or forced). For inference on images larger than the profile's nominal
// size, image gives the real size (tiled inference becomes possible).
// Ownership: a plain value. Thread safety: a value.
#ifndef TESSERA_SCHEDULER_JOB_REQUEST_H_
#define TESSERA_SCHEDULER_JOB_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/status.h"
#include "scheduler/layout.h"

namespace tessera::scheduler {

enum class JobKind { kTrain, kInfer };
std::string_view JobKindName(JobKind kind);  // "train", "infer"
std::optional<JobKind> ParseJobKind(std::string_view name);

struct ImageSize {
  int width = 0;
  int height = 0;
};

struct JobRequest {
  JobKind kind = JobKind::kTrain;
  int64_t global_batch = 0;  // samples (train) or images (infer) per step
  int min_devices = 1;
  int max_devices = 0;  // 0: no upper limit
  Layout layout = Layout::kAuto;
  std::optional<ImageSize> image;  // absent: the profile's nominal square image
  // Fraction of each device's memory kept free (CUDA context, workspace, fragmentation).
  double memory_reserve_fraction = 0.1;

  // OK, or InvalidArgument naming the field.
  Status Validate() const;
};

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_JOB_REQUEST_H_
