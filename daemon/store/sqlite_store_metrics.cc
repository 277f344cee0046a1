// SqliteStore (daemon/store/sqlite_store.h): the metrics history (RecordProgress,
// ListMetrics) and its thinning (MetricsRetention, daemon/store/store.h).

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "daemon/store/sqlite_store.h"
#include "daemon/store/sqlite_store_rows.h"
#include "daemon/store/sqlite_util.h"

namespace tessera::daemon {
namespace {

constexpr std::string_view kMetricColumns =
    "step, attempt, rank, ts_ms, loss, samples_per_s, compute_s, comm_s, bubble_s, "
    "peak_memory_bytes, predicted_peak_memory_bytes";

// Columns: kMetricColumns.
api::MetricPoint MetricFromRow(const Stmt& q) {
  api::MetricPoint p;
  p.step = q.Int(0);
  p.attempt = q.Int(1);
  p.rank = q.Int(2);
  p.ts_ms = q.Int(3);
  auto real = [&q](int col) -> std::optional<double> {
    if (q.IsNull(col)) return std::nullopt;
    return q.Double(col);
  };
  p.loss = real(4);
  p.samples_per_s = real(5);
  p.compute_s = real(6);
  p.comm_s = real(7);
  p.bubble_s = real(8);
  p.peak_memory_bytes = q.OptInt(9);
  p.predicted_peak_memory_bytes = q.OptInt(10);
  return p;
}

Result<std::vector<api::MetricPoint>> SelectMetrics(sqlite3* db, const std::string& sql,
                                                    const std::function<void(Stmt&)>& bind) {
  TESSERA_ASSIGN_OR_RETURN(Stmt q, Stmt::Prepare(db, sql));
  bind(q);
  std::vector<api::MetricPoint> out;
  TESSERA_RETURN_IF_ERROR(q.AppendRows(MetricFromRow, &out));
  return out;
}

// Appends one (job, rank)'s new points and thins its history (see
// MetricsRetention in daemon/store/store.h). Runs inside the caller's write.
Status AppendMetricSeries(sqlite3* db, api::JobId job, int64_t rank,
                          const std::vector<const api::MetricPoint*>& points,
                          const MetricsRetention& keep) {
  int64_t max_step = -1, stride = 1, thinned = -1;
  {
    TESSERA_ASSIGN_OR_RETURN(Stmt q,
                             Stmt::Prepare(db,
                                           "SELECT max_step, stride, thinned_through FROM "
                                           "job_metric_series WHERE job_id = ? AND rank = ?"));
    q.Bind(1, job).Bind(2, rank);
    TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) {
      max_step = q.Int(0);
      stride = std::max<int64_t>(1, q.Int(1));
      thinned = q.Int(2);
    }
  }
  for (const api::MetricPoint* p : points) max_step = std::max(max_step, p->step);
  const int64_t boundary = max_step - keep.recent_steps;  // steps <= boundary are "older"

  TESSERA_ASSIGN_OR_RETURN(Stmt ins,
                           Stmt::Prepare(db, "INSERT OR IGNORE INTO job_metrics (job_id, " +
                                                 std::string(kMetricColumns) +
                                                 ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  for (const api::MetricPoint* p : points) {
    if (p->step <= boundary && p->step % stride != 0) continue;  // thinned away at once
    auto real = [&ins](int i, const std::optional<double>& v) {
      if (v) {
        ins.BindDouble(i, *v);
      } else {
        ins.BindNull(i);
      }
    };
    ins.Reset();
    ins.Bind(1, job).Bind(2, p->step).Bind(3, p->attempt).Bind(4, p->rank).Bind(5, p->ts_ms);
    real(6, p->loss);
    real(7, p->samples_per_s);
    real(8, p->compute_s);
    real(9, p->comm_s);
    real(10, p->bubble_s);
    ins.Bind(11, p->peak_memory_bytes).Bind(12, p->predicted_peak_memory_bytes);
    TESSERA_RETURN_IF_ERROR(ins.Run());
  }

  if (boundary > thinned) {
    // Points that just left the recent window keep only the stride's steps.
    TESSERA_ASSIGN_OR_RETURN(Stmt del, Stmt::Prepare(db,
                                                     "DELETE FROM job_metrics WHERE job_id = ? "
                                                     "AND rank = ? AND step > ? AND step <= ? "
                                                     "AND step % ? != 0"));
    del.Bind(1, job).Bind(2, rank).Bind(3, thinned).Bind(4, boundary).Bind(5, stride);
    TESSERA_RETURN_IF_ERROR(del.Run());
    thinned = boundary;
  }
  if (boundary >= 0) {
    TESSERA_ASSIGN_OR_RETURN(Stmt count, Stmt::Prepare(db,
                                                       "SELECT COUNT(*) FROM job_metrics WHERE "
                                                       "job_id = ? AND rank = ? AND step <= ?"));
    count.Bind(1, job).Bind(2, rank).Bind(3, boundary);
    TESSERA_ASSIGN_OR_RETURN(bool row, count.Step());
    int64_t older = row ? count.Int(0) : 0;
    TESSERA_ASSIGN_OR_RETURN(Stmt thin, Stmt::Prepare(db,
                                                      "DELETE FROM job_metrics WHERE job_id = ? "
                                                      "AND rank = ? AND step <= ? AND step % ? "
                                                      "!= 0"));
    while (older > keep.older_points && stride <= boundary) {
      stride *= 2;
      thin.Reset().Bind(1, job).Bind(2, rank).Bind(3, boundary).Bind(4, stride);
      TESSERA_RETURN_IF_ERROR(thin.Run());
      older -= sqlite3_changes(db);
    }
    if (older > keep.older_points) {
      // Only step 0 is left below the boundary (several attempts wrote it).
      TESSERA_ASSIGN_OR_RETURN(Stmt all, Stmt::Prepare(db,
                                                       "DELETE FROM job_metrics WHERE job_id = ? "
                                                       "AND rank = ? AND step <= ?"));
      all.Bind(1, job).Bind(2, rank).Bind(3, boundary);
      TESSERA_RETURN_IF_ERROR(all.Run());
    }
  }
  TESSERA_ASSIGN_OR_RETURN(Stmt up, Stmt::Prepare(db,
                                                  "INSERT OR REPLACE INTO job_metric_series "
                                                  "(job_id, rank, max_step, stride, "
                                                  "thinned_through) VALUES (?, ?, ?, ?, ?)"));
  up.Bind(1, job).Bind(2, rank).Bind(3, max_step).Bind(4, stride).Bind(5, thinned);
  return up.Run();
}

}  // namespace

// ---------------------------------------------------------------- metrics history

Status SqliteStore::RecordProgress(const ProgressReport& report) {
  TESSERA_RETURN_IF_ERROR(ValidateProgressReport(report));
  if (report.latest.empty() && report.points.empty()) return Status::Ok();
  std::vector<std::pair<api::JobId, std::optional<std::string>>> latest;
  for (const auto& [job, progress] : report.latest) latest.emplace_back(job, JsonColumn(progress));
  std::map<std::pair<api::JobId, int64_t>, std::vector<const api::MetricPoint*>> series;
  for (const JobMetricPoint& p : report.points) {
    series[{p.job_id, p.point.rank}].push_back(&p.point);
  }
  const MetricsRetention keep = options_.metrics_retention;
  return Write([&](sqlite3* db) -> Status {
    std::map<api::JobId, bool> known;
    auto exists = [&](api::JobId job) -> Result<bool> {
      auto it = known.find(job);
      if (it != known.end()) return it->second;
      Status s = CheckJobExists(db, job);
      if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
      known[job] = s.ok();
      return s.ok();
    };
    TESSERA_ASSIGN_OR_RETURN(Stmt up,
                             Stmt::Prepare(db, "UPDATE jobs SET progress = ? WHERE id = ?"));
    for (const auto& [job, text] : latest) {
      up.Reset().Bind(1, text).Bind(2, job);
      TESSERA_RETURN_IF_ERROR(up.Run());
    }
    for (const auto& [key, points] : series) {
      TESSERA_ASSIGN_OR_RETURN(bool found, exists(key.first));
      if (!found) continue;
      TESSERA_RETURN_IF_ERROR(AppendMetricSeries(db, key.first, key.second, points, keep));
    }
    return Status::Ok();
  });
}

Result<api::MetricsPage> SqliteStore::ListMetrics(const api::MetricsQuery& query) {
  const int64_t limit = std::clamp<int64_t>(query.limit, 1, api::kMaxMetricsPageSize);
  const int64_t since = query.since.value_or(-1);
  std::string sql = "SELECT " + std::string(kMetricColumns) + " FROM job_metrics WHERE job_id = ?";
  if (query.rank) sql += " AND rank = ?";
  if (query.attempt) sql += " AND attempt = ?";
  auto bind = [&](Stmt& q, int64_t step_value) {
    int i = 1;
    q.Bind(i++, query.job_id);
    if (query.rank) q.Bind(i++, *query.rank);
    if (query.attempt) q.Bind(i++, *query.attempt);
    q.Bind(i++, step_value);
    return i;
  };
  api::MetricsPage page;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        std::vector<api::MetricPoint> rows,
        SelectMetrics(db, sql + " AND step > ? ORDER BY step, attempt, rank LIMIT ?",
                      [&](Stmt& q) { q.Bind(bind(q, since), limit + 1); }));
    TESSERA_ASSIGN_OR_RETURN(
        page, CutMetricsPage(query.job_id, std::move(rows), limit, [&](int64_t step) {
          return SelectMetrics(db, sql + " AND step = ? ORDER BY attempt, rank",
                               [&](Stmt& q) { bind(q, step); });
        }));
    return Status::Ok();
  }));
  return page;
}

}  // namespace tessera::daemon
