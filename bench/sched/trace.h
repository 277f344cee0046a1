// Traces for the scheduler simulator (trace_sim): the jobs a lab submits over
// a day, generated or read from a CSV file.
// Thread safety: plain values and pure functions.
#ifndef TESSERA_BENCH_SCHED_TRACE_H_
#define TESSERA_BENCH_SCHED_TRACE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "scheduler/job_request.h"
#include "scheduler/model_profile.h"

namespace tessera::scheduler::sim {

inline constexpr double kHour = 3600;
inline constexpr double kGiB = 1024.0 * 1024 * 1024;

// One submitted job (a CSV row): a training job, or an inference job over an
// archive (kind kInfer: global_batch images a step, steps x global_batch
// images in all).
struct TraceJob {
  double submit_s = 0;
  std::string user;
  std::string model;  // a profile's name: colorize-unet, denoiser-dncnn, ... (profile_files.h)
  int64_t global_batch = 0;
  int64_t steps = 0;
  int64_t min_devices = 1;
  int64_t max_devices = 0;  // 0: no bound
  int64_t priority = 0;
  JobKind kind = JobKind::kTrain;
  // The job's images when they are not the profile's own (0 x 0): a training
  // job's crop, an inference job's archive images. The planner scales the
  // profile's FLOPs and activations by their pixels, as tesserad does.
  int64_t image_width = 0;
  int64_t image_height = 0;
};

struct Trace {
  std::string name;
  std::string about;           // one line
  std::vector<TraceJob> jobs;  // by submission time
};

// The CSV's columns, as WriteTrace writes them (image_width and image_height
// only when a job has them). A trace's header names the ones it has, in any
// order: submit_s, user, model, global_batch and steps are required;
// min_devices (default 1), max_devices (0: no bound), priority (0), kind
// ("train", or "infer") and image_width with image_height (both or neither;
// 0: the profile's own images) may be left out.
inline constexpr const char* kCsvHeader =
    "submit_s,user,model,global_batch,steps,min_devices,max_devices,priority,kind";
inline constexpr const char* kCsvImageColumns = "image_width,image_height";
inline constexpr const char* kCsvHeaderTrainOnly =
    "submit_s,user,model,global_batch,steps,min_devices,max_devices,priority";

// A lab day: 25 training jobs of alice, bob, carol and dave at random times
// over 8 hours, a burst at 1 h (bob submits a sweep of 15 denoiser jobs at
// once), and 3 archive inference jobs (trace.cc says how lengths are drawn).
// `load` multiplies every length.
Trace GenerateLabDay(uint64_t seed, double load);

// Gavel's generated traces (OSDI'20), shaped after Microsoft's Philly cluster
// (ATC'19): `jobs` training jobs of `users` users (alice, bob, ... drawn
// evenly), Poisson arrivals at `jobs_per_hour`; each job's length alone on one
// A100-like GPU 10^x minutes, x uniform in [1.5, 3] for 8 in 10 and in [3, 4]
// for the rest (30 min to 17 h; 17 h to 7 days), times `load`; its size
// (Philly's GPU counts: 1, 2, 4 or 8 for 70, 10, 15 and 5 in 100) its
// max_devices; the four reference models at their usual batches.
// REQUIRES: jobs >= 1, jobs_per_hour > 0, users >= 1, load > 0.
Trace GeneratePhilly(uint64_t seed, double load, int jobs, double jobs_per_hour, int users);

// A lab's trace: a header naming its columns (kCsvHeader's), then one job a
// line; `#` lines are comments. kInvalidArgument names the row's field, or
// the header's column that is unknown, repeated or missing. Every row's model must be one of
// `profiles` (by name; nullptr: the builtin reference models).
Result<Trace> ReadTrace(const std::string& path,
                        const std::map<std::string, ModelProfile>* profiles = nullptr);
Status WriteTrace(const Trace& trace, const std::string& path);

}  // namespace tessera::scheduler::sim

#endif  // TESSERA_BENCH_SCHED_TRACE_H_
