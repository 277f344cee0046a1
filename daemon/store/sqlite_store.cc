// SqliteStore (daemon/store/sqlite_store.h): opening, the group-commit writer, the read
// pool and the statistics. The methods of each table concept are in their own
// file, sqlite_store_<concept>.cc (daemon/README.md lists them).

#include "daemon/store/sqlite_store.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

#include "daemon/store/sqlite_schema.h"
#include "daemon/store/sqlite_store_rows.h"
#include "daemon/store/sqlite_util.h"

namespace tessera::daemon {
namespace {

Status OpenConnection(const std::string& path, int flags, int busy_timeout_ms, sqlite3** out) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status s = SqliteStatus(db, rc, "open " + path);
    sqlite3_close(db);
    return s;
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, busy_timeout_ms);
  Status s = ExecSql(db, "PRAGMA foreign_keys = ON");
  if (!s.ok()) {
    sqlite3_close(db);
    return s;
  }
  *out = db;
  return Status::Ok();
}

}  // namespace

// ---------------------------------------------------------------- lifecycle

Result<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path,
                                                       SqliteStoreOptions options) {
  if (options.clock == nullptr) options.clock = SystemClock::Default();
  if (options.max_batch == 0) options.max_batch = 1;
  options.metrics_retention.recent_steps =
      std::max<int64_t>(0, options.metrics_retention.recent_steps);
  options.metrics_retention.older_points =
      std::max<int64_t>(1, options.metrics_retention.older_points);
  sqlite3* db = nullptr;
  TESSERA_RETURN_IF_ERROR(OpenConnection(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                                         options.busy_timeout_ms, &db));
  auto fail = [db](Status s) {
    sqlite3_close(db);
    return s;
  };
  {
    auto q = Stmt::Prepare(db, "PRAGMA journal_mode = WAL");
    if (!q.ok()) return fail(q.status());
    auto row = q->Step();
    if (!row.ok()) return fail(row.status());
    if (!*row || q->Text(0) != "wal") return fail(Internal("cannot put " + path + " in WAL mode"));
  }
  Status s = ExecSql(db, "PRAGMA synchronous = FULL");
  if (!s.ok()) return fail(s);
  auto version = MigrateSqliteSchema(db, options.clock->NowUnixMillis());
  if (!version.ok()) return fail(version.status().WithPrefix(path));
  return std::unique_ptr<SqliteStore>(new SqliteStore(path, std::move(options), db, *version));
}

SqliteStore::SqliteStore(std::string path, SqliteStoreOptions options, sqlite3* writer,
                         int64_t version)
    : path_(std::move(path)),
      options_(std::move(options)),
      clock_(options_.clock),
      writer_db_(writer),
      schema_version_(version),
      commit_latency_(options_.commit_histogram_bounds) {
  writer_ = std::thread([this] { WriterLoop(); });
}

SqliteStore::~SqliteStore() { Close(); }

void SqliteStore::Close() {
  {
    MutexLock lock(queue_mu_);
    if (closing_) return;
    closing_ = true;
  }
  queue_cv_.notify_all();
  writer_.join();
  sqlite3_close(writer_db_);
  writer_db_ = nullptr;
  MutexLock lock(pool_mu_);
  pool_closed_ = true;
  for (sqlite3* db : idle_readers_) sqlite3_close(db);
  idle_readers_.clear();
}

Status SqliteStore::Health() {
  MutexLock lock(queue_mu_);
  return closing_ ? StoreClosed() : Status::Ok();
}

// ---------------------------------------------------------------- writer

Status SqliteStore::Write(WriteFn fn) {
  WriteOp op{std::move(fn), {}};
  std::future<Status> done = op.done.get_future();
  {
    MutexLock lock(queue_mu_);
    if (closing_) return StoreClosed();
    queue_.push_back(std::move(op));
    ++pending_writes_;
  }
  queue_cv_.notify_one();
  Status s = done.get();
  --pending_writes_;
  return s;
}

void SqliteStore::WriterLoop() {
  std::vector<WriteOp> batch;
  while (true) {
    {
      MutexLock lock(queue_mu_);
      while (!closing_ && queue_.empty()) queue_cv_.wait(queue_mu_);
      if (queue_.empty()) return;  // closing and drained
      while (!queue_.empty() && batch.size() < options_.max_batch) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    RunBatch(batch);
    batch.clear();
  }
}

void SqliteStore::RunBatch(std::vector<WriteOp>& batch) {
  const auto start = clock_->SteadyNow();
  std::vector<Status> results;
  results.reserve(batch.size());
  Status begin = ExecSql(writer_db_, "BEGIN IMMEDIATE");
  if (!begin.ok()) {
    for (WriteOp& op : batch) op.done.set_value(begin);
    writes_ += batch.size();
    return;
  }
  after_commit_.clear();
  for (WriteOp& op : batch) {
    const size_t actions = after_commit_.size();
    Status s = ExecSql(writer_db_, "SAVEPOINT op");
    if (s.ok()) {
      try {
        s = op.fn(writer_db_);
      } catch (const std::exception& e) {
        s = Internal(std::string("store write threw: ") + e.what());
      }
      if (!s.ok()) ExecSql(writer_db_, "ROLLBACK TO op").IgnoreError();
      ExecSql(writer_db_, "RELEASE op").IgnoreError();
    }
    if (!s.ok()) after_commit_.resize(actions);  // rolled back: nothing to follow
    results.push_back(std::move(s));
  }
  Status commit = ExecSql(writer_db_, "COMMIT");
  if (!commit.ok()) {
    ExecSql(writer_db_, "ROLLBACK").IgnoreError();
    for (Status& s : results) {
      if (s.ok()) s = commit.WithPrefix("commit");
    }
  } else {
    ++commits_;
    commit_latency_.Record(std::chrono::duration<double>(clock_->SteadyNow() - start).count());
    for (auto& action : after_commit_) action();
  }
  after_commit_.clear();
  writes_ += batch.size();
  for (size_t i = 0; i < batch.size(); ++i) batch[i].done.set_value(std::move(results[i]));
}

void SqliteStore::AfterCommit(std::function<void()> action) {
  after_commit_.push_back(std::move(action));
}

// ---------------------------------------------------------------- readers

Result<sqlite3*> SqliteStore::AcquireReader() {
  {
    MutexLock lock(pool_mu_);
    if (pool_closed_) return StoreClosed();
    if (!idle_readers_.empty()) {
      sqlite3* db = idle_readers_.back();
      idle_readers_.pop_back();
      return db;
    }
  }
  sqlite3* db = nullptr;
  TESSERA_RETURN_IF_ERROR(
      OpenConnection(path_, SQLITE_OPEN_READONLY, options_.busy_timeout_ms, &db));
  return db;
}

void SqliteStore::ReleaseReader(sqlite3* db) {
  MutexLock lock(pool_mu_);
  if (pool_closed_) {
    sqlite3_close(db);
  } else {
    idle_readers_.push_back(db);
  }
}

Status SqliteStore::Read(const std::function<Status(sqlite3*)>& fn) {
  {
    MutexLock lock(queue_mu_);
    if (closing_) return StoreClosed();
  }
  TESSERA_ASSIGN_OR_RETURN(sqlite3 * db, AcquireReader());
  Status s = ExecSql(db, "BEGIN");
  if (s.ok()) {
    try {
      s = fn(db);
    } catch (const std::exception& e) {
      s = Internal(std::string("store read threw: ") + e.what());
    }
    ExecSql(db, "COMMIT").IgnoreError();
  }
  ReleaseReader(db);
  return s;
}

StoreStats SqliteStore::Stats() {
  StoreStats s;
  s.commit_seconds = commit_latency_.Snapshot();
  s.commits = commits_.load();
  s.writes = writes_.load();
  return s;
}

}  // namespace tessera::daemon
