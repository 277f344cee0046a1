// SqliteStore (daemon/store/sqlite_store.h): jobs and their event log.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "daemon/controller/job_state_machine.h"
#include "daemon/store/sqlite_store.h"
#include "daemon/store/sqlite_store_rows.h"
#include "daemon/store/sqlite_util.h"

namespace tessera::daemon {
namespace {

constexpr std::string_view kJobColumns =
    "id, owner, spec, state, attempt, reason, plan, progress, created_ms, updated_ms";

Result<api::Job> JobFromRow(const Stmt& q) {
  api::Job job;
  job.id = q.Int(0);
  job.owner = q.Text(1);
  TESSERA_ASSIGN_OR_RETURN(api::Json spec_json, ParseJsonColumn(q, 2, "job spec"));
  auto spec = api::JobSpecFromJson(spec_json);
  if (!spec.ok()) return Internal("stored job spec: " + spec.status().ToString());
  job.spec = std::move(spec).value();
  auto state = api::ParseJobState(q.Text(3));
  if (!state) return Internal("stored job state is unknown: " + q.Text(3));
  job.state = *state;
  job.attempt = q.Int(4);
  job.reason = q.Text(5);
  TESSERA_ASSIGN_OR_RETURN(job.plan, ParseJsonColumn(q, 6, "plan"));
  TESSERA_ASSIGN_OR_RETURN(job.progress, ParseJsonColumn(q, 7, "progress"));
  job.created_ms = q.Int(8);
  job.updated_ms = q.Int(9);
  return job;
}

Result<api::Job> SelectJob(sqlite3* db, api::JobId id) {
  TESSERA_ASSIGN_OR_RETURN(
      Stmt q, Stmt::Prepare(db, "SELECT " + std::string(kJobColumns) + " FROM jobs WHERE id = ?"));
  q.Bind(1, id);
  TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return NotFound("job " + std::to_string(id) + " not found");
  return JobFromRow(q);
}

}  // namespace

// ---------------------------------------------------------------- jobs

Result<api::Job> SqliteStore::InsertJob(const NewJob& in) {
  TESSERA_ASSIGN_OR_RETURN(api::Job job, PendingJobOf(in));
  const std::string spec_text = *JsonColumn(api::ToJson(in.spec));
  TESSERA_RETURN_IF_ERROR(Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt ins, Stmt::Prepare(db,
                                "INSERT INTO jobs (owner, name, spec, state, attempt, reason, "
                                "created_ms, updated_ms) VALUES (?, ?, ?, 'pending', 0, ?, ?, ?)"));
    ins.Bind(1, std::string_view(in.owner))
        .Bind(2, std::string_view(in.spec.name))
        .Bind(3, std::string_view(spec_text))
        .Bind(4, std::string_view(in.reason))
        .Bind(5, in.now_ms)
        .Bind(6, in.now_ms);
    TESSERA_RETURN_IF_ERROR(ins.Run());
    job.id = sqlite3_last_insert_rowid(db);
    TESSERA_ASSIGN_OR_RETURN(
        Stmt ev, Stmt::Prepare(db,
                               "INSERT INTO events (job_id, ts_ms, from_state, to_state, attempt, "
                               "reason) VALUES (?, ?, '', 'pending', 0, ?)"));
    ev.Bind(1, job.id).Bind(2, in.now_ms).Bind(3, std::string_view(in.reason));
    return ev.Run();
  }));
  return job;
}

Result<api::Job> SqliteStore::GetJob(api::JobId id) {
  api::Job job;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(job, SelectJob(db, id));
    return Status::Ok();
  }));
  return job;
}

Result<api::JobPage> SqliteStore::ListJobs(const api::JobQuery& query) {
  const int64_t limit = ClampStoreLimit(query.limit);
  std::string sql = "SELECT " + std::string(kJobColumns) + " FROM jobs WHERE id > ?";
  if (query.state) sql += " AND state = ?";
  if (query.owner) sql += " AND owner = ?";
  sql += " ORDER BY id LIMIT ?";
  api::JobPage page;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Stmt q, Stmt::Prepare(db, sql));
    int i = 1;
    q.Bind(i++, query.after);
    if (query.state) q.Bind(i++, api::JobStateName(*query.state));
    if (query.owner) q.Bind(i++, std::string_view(*query.owner));
    q.Bind(i++, limit + 1);
    while (true) {
      TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      if (static_cast<int64_t>(page.jobs.size()) == limit) {
        page.next_after = page.jobs.back().id;
        break;
      }
      TESSERA_ASSIGN_OR_RETURN(api::Job job, JobFromRow(q));
      page.jobs.push_back(std::move(job));
    }
    return Status::Ok();
  }));
  return page;
}

Result<api::Job> SqliteStore::TransitionJob(const JobTransition& t) {
  std::optional<std::string> plan_text;
  if (t.plan) plan_text = JsonColumn(*t.plan);
  api::Job job;
  TESSERA_RETURN_IF_ERROR(Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Stmt q, Stmt::Prepare(db, "SELECT state FROM jobs WHERE id = ?"));
    q.Bind(1, t.job_id);
    TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return NotFound("job " + std::to_string(t.job_id) + " not found");
    const std::string current = q.Text(0);
    if (current != api::JobStateName(t.expected)) {
      return FailedPrecondition("job " + std::to_string(t.job_id) + " is " + current +
                                ", expected " + std::string(api::JobStateName(t.expected)));
    }
    TESSERA_ASSIGN_OR_RETURN(
        Stmt up, Stmt::Prepare(db, t.plan ? "UPDATE jobs SET state = ?, attempt = ?, reason = ?, "
                                            "updated_ms = ?, plan = ? WHERE id = ?"
                                          : "UPDATE jobs SET state = ?, attempt = ?, reason = ?, "
                                            "updated_ms = ? WHERE id = ?"));
    up.Bind(1, api::JobStateName(t.next))
        .Bind(2, t.attempt)
        .Bind(3, std::string_view(t.reason))
        .Bind(4, t.now_ms);
    if (t.plan) up.Bind(5, plan_text);
    up.Bind(t.plan ? 6 : 5, t.job_id);
    TESSERA_RETURN_IF_ERROR(up.Run());
    TESSERA_ASSIGN_OR_RETURN(
        Stmt ev, Stmt::Prepare(db,
                               "INSERT INTO events (job_id, ts_ms, from_state, to_state, attempt, "
                               "reason) VALUES (?, ?, ?, ?, ?, ?)"));
    ev.Bind(1, t.job_id)
        .Bind(2, t.now_ms)
        .Bind(3, std::string_view(current))
        .Bind(4, api::JobStateName(t.next))
        .Bind(5, t.attempt)
        .Bind(6, std::string_view(t.reason));
    TESSERA_RETURN_IF_ERROR(ev.Run());
    TESSERA_ASSIGN_OR_RETURN(job, SelectJob(db, t.job_id));
    return Status::Ok();
  }));
  return job;
}

Result<std::vector<api::Event>> SqliteStore::ListEvents(api::JobId job, int64_t after,
                                                        int64_t limit) {
  std::vector<api::Event> out;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt q, Stmt::Prepare(db,
                              "SELECT id, job_id, ts_ms, from_state, to_state, attempt, reason "
                              "FROM events WHERE job_id = ? AND id > ? ORDER BY id LIMIT ?"));
    q.Bind(1, job).Bind(2, after).Bind(3, ClampStoreLimit(limit));
    return q.AppendRows(
        [](const Stmt& row) {
          return api::Event{row.Int(0),  row.Int(1), row.Int(2), row.Text(3),
                            row.Text(4), row.Int(5), row.Text(6)};
        },
        &out);
  }));
  return out;
}

Status SqliteStore::SetJobProgress(api::JobId job, const api::Json& progress) {
  const std::optional<std::string> text = JsonColumn(progress);
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Stmt up,
                             Stmt::Prepare(db, "UPDATE jobs SET progress = ? WHERE id = ?"));
    up.Bind(1, text).Bind(2, job);
    return RunOnExistingRow(db, up, "job " + std::to_string(job) + " not found");
  });
}

Result<JobStateCounts> SqliteStore::CountJobsByState() {
  std::map<api::JobState, int64_t> counts;
  for (api::JobState s : kAllJobStates) counts[s] = 0;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Stmt q,
                             Stmt::Prepare(db, "SELECT state, COUNT(*) FROM jobs GROUP BY state"));
    return q.ForEachRow([&](const Stmt& row) -> Status {
      auto state = api::ParseJobState(row.Text(0));
      if (!state) return Internal("stored job state is unknown: " + row.Text(0));
      counts[*state] = row.Int(1);
      return Status::Ok();
    });
  }));
  return counts;
}

}  // namespace tessera::daemon
