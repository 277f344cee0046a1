// A job's metrics history as the CLI reads it: FetchMetrics follows
// GET /api/v1/jobs/{id}/metrics page by page; TrainingWatch is what
// `job ID --watch` keeps between polls of a training job and the frame it
// draws (cli/training_view.h).
//
// Thread safety: as RunCli; a TrainingWatch belongs to one command.
#ifndef TESSERA_CLI_TRAINING_WATCH_H_
#define TESSERA_CLI_TRAINING_WATCH_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "api/types.h"
#include "cli/cli_app.h"
#include "cli/training_view.h"

namespace tessera::cli {

// Every point of a job's metrics history with step > since (all when since
// < 0), of one rank and attempt when given, following next_since page by
// page. Returns an exit code.
int FetchMetrics(CliContext& ctx, int64_t id, std::optional<int64_t> rank,
                 std::optional<int64_t> attempt, int64_t since, std::vector<api::MetricPoint>* out);

// What `job ID --watch` keeps between polls of a training job: the whole
// history, read once (and again when a new attempt begins, as it may repeat
// steps), then the current attempt's steps after the last one each of its
// ranks reported (ranks report through different agents, so one may lag).
struct TrainingWatch {
  // Ranks more than this many steps behind the others are not waited for.
  static constexpr int64_t kMaxLag = 200;

  std::map<std::tuple<int64_t, int64_t, int64_t>, api::MetricPoint>
      points;            // (step, attempt, rank)
  int64_t attempt = -1;  // the job's attempt when the history was read
  std::map<int64_t, RankDevice> devices;
  api::Json nodes = api::Json::array();
  bool nodes_fetched = false;

  // Reads the nodes (once) and the points `job` added since the last call
  // (all of them again when its attempt changed). Returns an exit code.
  int Update(CliContext& ctx, const api::Json& job);

  // The lowest of the current attempt's ranks' last steps; -1 before any.
  int64_t SinceForAttempt() const;

  // The loss sparkline and the per-rank table of the newest step.
  std::string Frame() const;
};

// A training job (spec.kind "train", the default).
bool IsTrainJob(const api::Json& job);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_TRAINING_WATCH_H_
