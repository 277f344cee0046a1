// A lab's own jobs as a trace for the scheduler simulator
// (bench/sched/trace_sim --trace, its CSV format: bench/sched/README.md,
// "Trace files"), so that a lab can replay what it ran under each policy, on
// its own machines (--cluster) and models (--profile).
//
// One row per job whose work Tessera counts: a builtin or model: entrypoint's
// training job (its steps) and an infer job whose archive has been counted
// (steps: its images over the global batch, rounded up). submit_s is seconds
// from the first such job's submission; the model column is the entrypoint's
// name (builtin:colorize-unet -> colorize-unet, model:own-unet -> own-unet:
// the simulator knows a model: entrypoint's only through --profile). A job
// left out (a cmd: entrypoint's script counts its own steps; an archive not
// counted yet) is a `#` comment line saying why, which the simulator skips.
// Jobs in any state are written: a trace is what was submitted.
//
// Thread safety: pure function.
#ifndef TESSERA_CLI_TRACE_EXPORT_H_
#define TESSERA_CLI_TRACE_EXPORT_H_

#include <string>
#include <vector>

#include "api/types.h"

namespace tessera::cli {

// The simulator's columns, in its order (bench/sched/trace.h kCsvHeader, then
// kCsvImageColumns): a training job's images are its --image-size crop, an
// infer job's its image_width x image_height; 0,0 where the job names none
// (the profile's own), as tesserad plans them.
inline constexpr const char* kTraceHeader =
    "submit_s,user,model,global_batch,steps,min_devices,max_devices,priority,kind,image_width,"
    "image_height";

// The CSV (header, rows by submission, comment lines for the jobs left out).
// `jobs`: the API's job objects (GET /api/v1/jobs); one that does not parse
// is left out with its error.
std::string JobsAsTrace(const std::vector<api::Json>& jobs);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_TRACE_EXPORT_H_
