#include "cli/training_watch.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "cli/api_call.h"
#include "cli/output_format.h"

namespace tessera::cli {

using api::Json;

int FetchMetrics(CliContext& ctx, int64_t id, std::optional<int64_t> rank,
                 std::optional<int64_t> attempt, int64_t since,
                 std::vector<api::MetricPoint>* out) {
  for (int pages = 0; pages < 10000; ++pages) {
    std::string target = "/api/v1/jobs/" + std::to_string(id) +
                         "/metrics?limit=" + std::to_string(api::kMaxMetricsPageSize);
    if (rank) target += "&rank=" + std::to_string(*rank);
    if (attempt) target += "&attempt=" + std::to_string(*attempt);
    if (since >= 0) target += "&since=" + std::to_string(since);
    Json body;
    if (int code = CallApi(ctx, "GET", target, "", &body); code != kExitOk) return code;
    Result<api::MetricsPage> page = api::MetricsPageFromJson(body);
    if (!page.ok()) {
      PrintError(ctx.err, page.status().WithPrefix("the server's metrics page"));
      return kExitApiError;
    }
    out->insert(out->end(), page->points.begin(), page->points.end());
    if (!page->next_since || *page->next_since <= since) break;
    since = *page->next_since;
  }
  return kExitOk;
}

int TrainingWatch::Update(CliContext& ctx, const Json& job) {
  const int64_t id = Int(job, "id");
  if (!nodes_fetched) {
    nodes_fetched = true;
    Json body;
    if (CallApi(ctx, "GET", "/api/v1/nodes", "", &body) == kExitOk && body.is_object()) {
      nodes = body.value("nodes", Json::array());
    }
  }
  devices = RankDevicesOf(job.value("plan", Json()), nodes);
  std::vector<api::MetricPoint> fresh;
  int code = kExitOk;
  if (Int(job, "attempt") != attempt) {
    attempt = Int(job, "attempt");
    points.clear();
    code = FetchMetrics(ctx, id, std::nullopt, std::nullopt, -1, &fresh);
  } else {
    code = FetchMetrics(ctx, id, std::nullopt, attempt, SinceForAttempt(), &fresh);
  }
  if (code != kExitOk) return code;
  for (api::MetricPoint& p : fresh) points[{p.step, p.attempt, p.rank}] = std::move(p);
  return kExitOk;
}

int64_t TrainingWatch::SinceForAttempt() const {
  std::map<int64_t, int64_t> last;  // rank -> step
  for (const auto& [key, p] : points) {
    if (p.attempt == attempt) last[p.rank] = std::max(last[p.rank], p.step);
  }
  if (last.empty()) return -1;
  int64_t newest = 0, since = INT64_MAX;
  for (const auto& [rank, step] : last) {
    newest = std::max(newest, step);
    since = std::min(since, step);
  }
  return std::max(since, newest - kMaxLag);
}

std::string TrainingWatch::Frame() const {
  std::vector<api::MetricPoint> list;
  for (const auto& [key, p] : points) list.push_back(p);
  return LossLines(list, 40) + RankTable(list, devices);
}

bool IsTrainJob(const Json& job) {
  return job.is_object() && job.value("spec", Json::object()).value("kind", "train") == "train";
}

}  // namespace tessera::cli
