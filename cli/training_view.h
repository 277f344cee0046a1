// TrainingView: how the CLI shows a training job's metrics history
// (GET /api/v1/jobs/{id}/metrics, api::MetricPoint).
//
// `tessera job ID --watch` draws, from the newest point of each rank:
//   loss     █▆▄▃▂▂▁▁  2.31 -> 0.412  (steps 1-1200)
//   recovered: attempt 2 from step 531
//   RANK  DEVICE  STEP  STEP S  COMPUTE       COMM          BUBBLE       MEMORY
//   0     a:0     1200  0.412   0.300 (73%)   0.080 (19%)   0.032 (8%)   3.1 GiB of 80.0 GiB (4%)
// where STEP S is compute + comm + bubble of that step and each share is
// its part of it. `tessera metrics ID` prints every point as a table or CSV.
//
// Thread safety: pure functions.
#ifndef TESSERA_CLI_TRAINING_VIEW_H_
#define TESSERA_CLI_TRAINING_VIEW_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "api/types.h"

namespace tessera::cli {

// The device a rank runs on: "node:index" and its memory (0: unknown).
struct RankDevice {
  std::string label;
  int64_t memory_bytes = 0;
};

// Ranks of a job's plan (the job's "plan" JSON, scheduler/plan_json.h) as
// tesserad numbers them: replica by replica, stage by stage, device by
// device; memory from the nodes list (GET /api/v1/nodes "nodes"). Missing or
// malformed parts are skipped.
std::map<int64_t, RankDevice> RankDevicesOf(const api::Json& plan, const api::Json& nodes);

// One block character per cell ("▁".."█", UTF-8) over `values` split into
// at most `width` runs of consecutive values (each drawn at its mean),
// scaled between the lowest and highest mean. "" for no values.
std::string Sparkline(const std::vector<double>& values, int width);

// One value per step: the lowest rank's point, the newest attempt winning
// where attempts repeat a step. Points in any order; result by step.
std::vector<api::MetricPoint> LossSeries(const std::vector<api::MetricPoint>& points);

// "loss     <sparkline>  2.31 -> 0.412  (steps 1-1200)\n", then one
// "recovered: attempt N from step S\n" per later attempt; a history
// without loss gives "loss     (no values yet)\n".
std::string LossLines(const std::vector<api::MetricPoint>& points, int width);

// The per-rank table of the newest point of each rank in the newest
// attempt (see above). Ranks without a device in `devices` show "-".
std::string RankTable(const std::vector<api::MetricPoint>& points,
                      const std::map<int64_t, RankDevice>& devices);

// Every point, in the given order: STEP ATTEMPT RANK TIME LOSS SAMPLES/S
// COMPUTE S COMM S BUBBLE S PEAK MEMORY.
std::string MetricsTable(const std::vector<api::MetricPoint>& points);

// A header line and one line per point; absent figures are empty cells:
// step,attempt,rank,ts_ms,loss,samples_per_s,compute_s,comm_s,bubble_s,
// peak_memory_bytes,predicted_peak_memory_bytes
std::string MetricsCsv(const std::vector<api::MetricPoint>& points);

// "512 B", "3.0 MiB", "80.0 GiB".
std::string FormatMemory(int64_t bytes);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_TRAINING_VIEW_H_
