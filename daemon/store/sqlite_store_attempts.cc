// SqliteStore (daemon/store/sqlite_store.h): job attempts.

#include <string>
#include <utility>
#include <vector>

#include "daemon/store/sqlite_store.h"
#include "daemon/store/sqlite_store_rows.h"
#include "daemon/store/sqlite_util.h"

namespace tessera::daemon {
namespace {

Result<JobAttempt> AttemptFromRow(const Stmt& q) {
  JobAttempt a;
  a.job_id = q.Int(0);
  a.attempt = q.Int(1);
  TESSERA_ASSIGN_OR_RETURN(a.plan, ParseJsonColumn(q, 2, "attempt plan"));
  a.started_ms = q.Int(3);
  a.ended_ms = q.OptInt(4);
  a.result = q.Text(5);
  return a;
}

}  // namespace

// ---------------------------------------------------------------- attempts

Status SqliteStore::InsertAttempt(const JobAttempt& a) {
  const std::optional<std::string> plan = JsonColumn(a.plan);
  return Write([&](sqlite3* db) -> Status {
    TESSERA_RETURN_IF_ERROR(CheckJobExists(db, a.job_id));
    TESSERA_ASSIGN_OR_RETURN(
        Stmt ins, Stmt::Prepare(db,
                                "INSERT INTO job_attempts (job_id, attempt, plan, started_ms, "
                                "ended_ms, result) VALUES (?, ?, ?, ?, ?, ?)"));
    ins.Bind(1, a.job_id)
        .Bind(2, a.attempt)
        .Bind(3, plan)
        .Bind(4, a.started_ms)
        .Bind(5, a.ended_ms)
        .Bind(6, std::string_view(a.result));
    Status s = ins.Run();
    if (s.code() == StatusCode::kAlreadyExists) {
      return AlreadyExists("attempt " + std::to_string(a.attempt) + " of job " +
                               std::to_string(a.job_id) + " exists",
                           "attempt");
    }
    return s;
  });
}

Result<JobAttempt> SqliteStore::GetAttempt(api::JobId job, int64_t attempt) {
  JobAttempt out;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt q, Stmt::Prepare(db,
                              "SELECT job_id, attempt, plan, started_ms, ended_ms, result "
                              "FROM job_attempts WHERE job_id = ? AND attempt = ?"));
    q.Bind(1, job).Bind(2, attempt);
    TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return NotFound("attempt not found");
    TESSERA_ASSIGN_OR_RETURN(out, AttemptFromRow(q));
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<JobAttempt>> SqliteStore::ListAttempts(api::JobId job) {
  std::vector<JobAttempt> out;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt q, Stmt::Prepare(db,
                              "SELECT job_id, attempt, plan, started_ms, ended_ms, result "
                              "FROM job_attempts WHERE job_id = ? ORDER BY attempt"));
    q.Bind(1, job);
    return q.AppendRows(AttemptFromRow, &out);
  }));
  return out;
}

Status SqliteStore::FinishAttempt(api::JobId job, int64_t attempt, int64_t ended_ms,
                                  std::string_view result) {
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Stmt up,
                             Stmt::Prepare(db,
                                           "UPDATE job_attempts SET ended_ms = ?, result = ? "
                                           "WHERE job_id = ? AND attempt = ?"));
    up.Bind(1, ended_ms).Bind(2, result).Bind(3, job).Bind(4, attempt);
    return RunOnExistingRow(db, up, "attempt not found");
  });
}

Status SqliteStore::DeleteAttempt(api::JobId job, int64_t attempt) {
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt del, Stmt::Prepare(db, "DELETE FROM job_attempts WHERE job_id = ? AND attempt = ?"));
    del.Bind(1, job).Bind(2, attempt);
    return RunOnExistingRow(db, del, "attempt not found");
  });
}

Status SqliteStore::SetAttemptPlan(api::JobId job, int64_t attempt, const api::Json& plan) {
  const std::optional<std::string> text = JsonColumn(plan);
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt up,
        Stmt::Prepare(db, "UPDATE job_attempts SET plan = ? WHERE job_id = ? AND attempt = ?"));
    up.Bind(1, text).Bind(2, job).Bind(3, attempt);
    return RunOnExistingRow(db, up, "attempt not found");
  });
}

}  // namespace tessera::daemon
