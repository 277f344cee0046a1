// A lab's jobs as a simulator trace (trace_export.h).
#include "cli/trace_export.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "api/entrypoint_kind.h"
#include "api/job_images.h"

namespace tessera::cli {
namespace {

struct Row {
  int64_t created_ms = 0;
  api::JobId id = 0;
  std::string line;  // without submit_s
};

// The job's steps as the simulator counts them, or why it has none.
std::optional<int64_t> StepsOf(const api::Job& job, std::string* why) {
  if (job.spec.kind == api::JobKind::kTrain) return job.spec.steps;
  const int64_t images =
      job.inference.is_object() ? job.inference.value("images_total", int64_t{0}) : 0;
  if (images <= 0) {
    *why = "its archive's images are not counted yet";
    return std::nullopt;
  }
  return (images + job.spec.global_batch - 1) / job.spec.global_batch;
}

// The job's images as "width,height" (trace_export.h), "0,0" when it names
// none; an --image-size that is not a whole number is tesserad's to refuse
// (the job never ran), written as none.
std::string ImagesOf(const api::Job& job) {
  const Result<std::optional<api::ImageExtent>> images = api::JobImages(job.spec);
  if (!images.ok() || !*images) return "0,0";
  return std::to_string((*images)->width) + "," + std::to_string((*images)->height);
}

}  // namespace

std::string JobsAsTrace(const std::vector<api::Json>& jobs) {
  std::vector<Row> rows;
  std::string left_out;
  for (const api::Json& j : jobs) {
    Result<api::Job> job = api::JobFromJson(j);
    if (!job.ok()) {
      left_out += "# a job left out: " + job.status().ToString() + "\n";
      continue;
    }
    const std::string what = "# job " + std::to_string(job->id) + " (" + job->owner + ", " +
                             job->spec.entrypoint + ") left out: ";
    const api::EntrypointKind kind = api::EntrypointKindOf(job->spec.entrypoint);
    if (kind != api::EntrypointKind::kBuiltin && kind != api::EntrypointKind::kModel) {
      left_out += what + "a script counts its own steps\n";
      continue;
    }
    std::string why;
    const std::optional<int64_t> steps = StepsOf(*job, &why);
    if (!steps) {
      left_out += what + why + "\n";
      continue;
    }
    rows.push_back({job->created_ms, job->id,
                    job->owner + "," + std::string(api::EntrypointId(job->spec.entrypoint)) + "," +
                        std::to_string(job->spec.global_batch) + "," + std::to_string(*steps) +
                        "," + std::to_string(job->spec.min_devices) + "," +
                        std::to_string(job->spec.max_devices) + "," +
                        std::to_string(job->spec.priority) + "," +
                        std::string(api::JobKindName(job->spec.kind)) + "," + ImagesOf(*job)});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return a.created_ms != b.created_ms ? a.created_ms < b.created_ms : a.id < b.id;
  });
  std::string out = std::string(kTraceHeader) + "\n";
  for (const Row& r : rows) {
    char submit[32];
    std::snprintf(submit, sizeof submit, "%.3f",
                  static_cast<double>(r.created_ms - rows.front().created_ms) / 1000.0);
    out += std::string(submit) + "," + r.line + "\n";
  }
  return out + left_out;
}

}  // namespace tessera::cli
