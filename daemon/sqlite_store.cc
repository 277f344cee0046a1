#include "daemon/sqlite_store.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <utility>

#include "daemon/job_state_machine.h"
#include "daemon/sqlite_schema.h"
#include "daemon/sqlite_util.h"

namespace tessera::daemon {
namespace {

constexpr std::string_view kJobColumns =
    "id, owner, spec, state, attempt, reason, plan, progress, created_ms, updated_ms";

// JSON text for a column; null becomes SQL NULL. Invalid UTF-8 is replaced
// rather than thrown.
std::optional<std::string> JsonColumn(const api::Json& j) {
  if (j.is_null()) return std::nullopt;
  return j.dump(-1, ' ', false, api::Json::error_handler_t::replace);
}

Result<api::Json> ParseJsonColumn(const Stmt& q, int col, std::string_view what) {
  if (q.IsNull(col)) return api::Json();
  api::Json j = api::Json::parse(q.Text(col), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Internal("stored " + std::string(what) + " is not valid JSON");
  return j;
}

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

Result<TokenInfo> TokenFromRow(const Stmt& q) {
  TokenInfo t;
  t.id = q.Text(0);
  t.user = q.Text(1);
  auto role = api::ParseRole(q.Text(2));
  if (!role) return Internal("stored token role is unknown");
  t.role = *role;
  t.created_ms = q.Int(3);
  t.revoked_ms = q.OptInt(4);
  return t;
}

// Reads the devices of `node` into it.
Status LoadDevices(sqlite3* db, api::Node* node) {
  TESSERA_ASSIGN_OR_RETURN(
      Stmt q, Stmt::Prepare(db, "SELECT detail FROM devices WHERE node = ? ORDER BY idx"));
  q.Bind(1, std::string_view(node->name));
  while (true) {
    TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    TESSERA_ASSIGN_OR_RETURN(api::Json j, ParseJsonColumn(q, 0, "device"));
    auto device = api::DeviceFromJson(j);
    if (!device.ok()) return Internal("stored device: " + device.status().ToString());
    device->node = node->name;
    node->devices.push_back(std::move(device).value());
  }
  return Status::Ok();
}

// The columns NodeFromRow reads, in its order.
constexpr char kNodeColumns[] =
    "name, address, health, last_heartbeat_ms, links, cpu_cores, network_bandwidth_bytes_per_s, "
    "network_latency_s";

// Columns: kNodeColumns.
Result<api::Node> NodeFromRow(const Stmt& q) {
  api::Node n;
  n.name = q.Text(0);
  n.address = q.Text(1);
  n.health = q.Text(2);
  n.last_heartbeat_ms = q.Int(3);
  n.cpu_cores = q.Int(5);
  n.network_bandwidth_bytes_per_s = q.Double(6);
  n.network_latency_s = q.Double(7);
  TESSERA_ASSIGN_OR_RETURN(api::Json links, ParseJsonColumn(q, 4, "node links"));
  if (links.is_array()) {
    for (const api::Json& l : links) {
      auto link = api::DeviceLinkFromJson(l);
      if (!link.ok()) return Internal("stored link: " + link.status().ToString());
      n.links.push_back(*std::move(link));
    }
  }
  return n;
}

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

Status Closed() { return Unavailable("store is closed"); }

Status CheckJobExists(sqlite3* db, api::JobId job) {
  TESSERA_ASSIGN_OR_RETURN(Stmt q, Stmt::Prepare(db, "SELECT 1 FROM jobs WHERE id = ?"));
  q.Bind(1, job);
  TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return NotFound("job " + std::to_string(job) + " not found");
  return Status::Ok();
}

// The job's counters (schema 8 keeps them as chunks change): one row read,
// however many chunks the job has.
Result<ChunkCounts> CountChunksOn(sqlite3* db, api::JobId job) {
  ChunkCounts c;
  TESSERA_ASSIGN_OR_RETURN(Stmt q, Stmt::Prepare(db,
                                                 "SELECT chunks_total, images_total, chunks_done, "
                                                 "images_done, chunks_leased "
                                                 "FROM infer_chunk_counts WHERE job_id = ?"));
  q.Bind(1, job);
  TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return c;
  c.chunks_total = q.Int(0);
  c.images_total = q.Int(1);
  c.chunks_done = q.Int(2);
  c.images_done = q.Int(3);
  c.chunks_leased = q.Int(4);
  return c;
}

// Columns: chunk, items, state, attempt, rank, lease_until_ms, done_ms.
constexpr std::string_view kChunkColumns =
    "chunk, items, state, attempt, rank, lease_until_ms, done_ms";

Result<InferChunk> ChunkFromRow(const Stmt& q, api::JobId job) {
  InferChunk c;
  c.job_id = job;
  c.chunk = q.Int(0);
  TESSERA_ASSIGN_OR_RETURN(api::Json items, ParseJsonColumn(q, 1, "chunk items"));
  if (!items.is_array()) return Internal("stored chunk items are not an array");
  for (const api::Json& item : items) {
    if (!item.is_string()) return Internal("stored chunk item is not a string");
    c.items.push_back(item.get<std::string>());
  }
  auto state = ParseChunkState(q.Text(2));
  if (!state) return Internal("stored chunk state is unknown: " + q.Text(2));
  c.state = *state;
  c.attempt = q.Int(3);
  c.rank = q.Int(4);
  c.lease_until_ms = q.Int(5);
  c.done_ms = q.Int(6);
  return c;
}

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
  while (true) {
    TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    out.push_back(MetricFromRow(q));
  }
  return out;
}

// Appends one (job, rank)'s new points and thins its history (see
// MetricsRetention in daemon/store.h). Runs inside the caller's write.
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
    std::lock_guard lock(queue_mu_);
    if (closing_) return;
    closing_ = true;
  }
  queue_cv_.notify_all();
  writer_.join();
  sqlite3_close(writer_db_);
  writer_db_ = nullptr;
  std::lock_guard lock(pool_mu_);
  pool_closed_ = true;
  for (sqlite3* db : idle_readers_) sqlite3_close(db);
  idle_readers_.clear();
}

Status SqliteStore::Health() {
  std::lock_guard lock(queue_mu_);
  return closing_ ? Closed() : Status::Ok();
}

// ---------------------------------------------------------------- writer

Status SqliteStore::Write(WriteFn fn) {
  WriteOp op{std::move(fn), {}};
  std::future<Status> done = op.done.get_future();
  {
    std::lock_guard lock(queue_mu_);
    if (closing_) return Closed();
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
      std::unique_lock lock(queue_mu_);
      queue_cv_.wait(lock, [this] { return closing_ || !queue_.empty(); });
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

void SqliteStore::CacheNode(const std::string& name, std::optional<api::Node> row) {
  std::lock_guard lock(nodes_mu_);
  ++nodes_version_;
  if (!nodes_loaded_) return;
  if (row) {
    nodes_[name] = *std::move(row);
  } else {
    nodes_.erase(name);
  }
}

// ---------------------------------------------------------------- readers

Result<sqlite3*> SqliteStore::AcquireReader() {
  {
    std::lock_guard lock(pool_mu_);
    if (pool_closed_) return Closed();
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
  std::lock_guard lock(pool_mu_);
  if (pool_closed_) {
    sqlite3_close(db);
  } else {
    idle_readers_.push_back(db);
  }
}

Status SqliteStore::Read(const std::function<Status(sqlite3*)>& fn) {
  {
    std::lock_guard lock(queue_mu_);
    if (closing_) return Closed();
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

// ---------------------------------------------------------------- jobs

Result<api::Job> SqliteStore::InsertJob(const NewJob& in) {
  if (in.owner.empty()) return InvalidArgument("must not be empty", "owner");
  api::Job job;
  job.owner = in.owner;
  job.spec = in.spec;
  job.state = api::JobState::kPending;
  job.created_ms = in.now_ms;
  job.updated_ms = in.now_ms;
  job.reason = in.reason;
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
    while (true) {
      TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      out.push_back(
          api::Event{q.Int(0), q.Int(1), q.Int(2), q.Text(3), q.Text(4), q.Int(5), q.Text(6)});
    }
    return Status::Ok();
  }));
  return out;
}

Status SqliteStore::SetJobProgress(api::JobId job, const api::Json& progress) {
  const std::optional<std::string> text = JsonColumn(progress);
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Stmt up,
                             Stmt::Prepare(db, "UPDATE jobs SET progress = ? WHERE id = ?"));
    up.Bind(1, text).Bind(2, job);
    TESSERA_RETURN_IF_ERROR(up.Run());
    if (sqlite3_changes(db) == 0) return NotFound("job " + std::to_string(job) + " not found");
    return Status::Ok();
  });
}

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

Result<std::map<api::JobState, int64_t>> SqliteStore::CountJobsByState() {
  std::map<api::JobState, int64_t> counts;
  for (api::JobState s : kAllJobStates) counts[s] = 0;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Stmt q,
                             Stmt::Prepare(db, "SELECT state, COUNT(*) FROM jobs GROUP BY state"));
    while (true) {
      TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      auto state = api::ParseJobState(q.Text(0));
      if (!state) return Internal("stored job state is unknown: " + q.Text(0));
      counts[*state] = q.Int(1);
    }
    return Status::Ok();
  }));
  return counts;
}

// ---------------------------------------------------------------- attempts

Status SqliteStore::InsertAttempt(const JobAttempt& a) {
  const std::optional<std::string> plan = JsonColumn(a.plan);
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Stmt q, Stmt::Prepare(db, "SELECT 1 FROM jobs WHERE id = ?"));
    q.Bind(1, a.job_id);
    TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return NotFound("job " + std::to_string(a.job_id) + " not found");
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
    while (true) {
      TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      TESSERA_ASSIGN_OR_RETURN(JobAttempt a, AttemptFromRow(q));
      out.push_back(std::move(a));
    }
    return Status::Ok();
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
    TESSERA_RETURN_IF_ERROR(up.Run());
    if (sqlite3_changes(db) == 0) return NotFound("attempt not found");
    return Status::Ok();
  });
}

Status SqliteStore::DeleteAttempt(api::JobId job, int64_t attempt) {
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt del, Stmt::Prepare(db, "DELETE FROM job_attempts WHERE job_id = ? AND attempt = ?"));
    del.Bind(1, job).Bind(2, attempt);
    TESSERA_RETURN_IF_ERROR(del.Run());
    if (sqlite3_changes(db) == 0) return NotFound("attempt not found");
    return Status::Ok();
  });
}

// ---------------------------------------------------------------- nodes

Status SqliteStore::UpsertNode(const api::Node& node) {
  TESSERA_RETURN_IF_ERROR(ValidateNode(node));
  std::vector<std::string> details;
  for (const api::Device& d : node.devices) {
    api::Device copy = d;
    copy.node = node.name;
    details.push_back(*JsonColumn(api::ToJson(copy)));
  }
  api::Json links = api::Json::array();
  for (const api::DeviceLink& l : node.links) links.push_back(api::ToJson(l));
  const std::string links_text = *JsonColumn(links);
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt up,
        Stmt::Prepare(db,
                      "INSERT INTO nodes (name, address, health, last_heartbeat_ms, links, "
                      "cpu_cores, network_bandwidth_bytes_per_s, network_latency_s) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                      "address = excluded.address, health = excluded.health, "
                      "last_heartbeat_ms = excluded.last_heartbeat_ms, "
                      "links = excluded.links, cpu_cores = excluded.cpu_cores, "
                      "network_bandwidth_bytes_per_s = excluded.network_bandwidth_bytes_per_s, "
                      "network_latency_s = excluded.network_latency_s"));
    up.Bind(1, std::string_view(node.name))
        .Bind(2, std::string_view(node.address))
        .Bind(3, std::string_view(node.health))
        .Bind(4, node.last_heartbeat_ms)
        .Bind(5, std::string_view(links_text))
        .Bind(6, node.cpu_cores)
        .BindDouble(7, node.network_bandwidth_bytes_per_s)
        .BindDouble(8, node.network_latency_s);
    TESSERA_RETURN_IF_ERROR(up.Run());
    TESSERA_ASSIGN_OR_RETURN(Stmt del, Stmt::Prepare(db, "DELETE FROM devices WHERE node = ?"));
    del.Bind(1, std::string_view(node.name));
    TESSERA_RETURN_IF_ERROR(del.Run());
    for (size_t i = 0; i < node.devices.size(); ++i) {
      const api::Device& d = node.devices[i];
      TESSERA_ASSIGN_OR_RETURN(
          Stmt ins, Stmt::Prepare(db,
                                  "INSERT INTO devices (node, idx, uuid, type, emulated, detail) "
                                  "VALUES (?, ?, ?, ?, ?, ?)"));
      ins.Bind(1, std::string_view(node.name))
          .Bind(2, d.index)
          .Bind(3, std::string_view(d.uuid))
          .Bind(4, std::string_view(d.type))
          .Bind(5, int64_t{d.emulated ? 1 : 0})
          .Bind(6, std::string_view(details[i]));
      TESSERA_RETURN_IF_ERROR(ins.Run());
    }
    // The row as a read will see it, for the in-memory rows.
    TESSERA_ASSIGN_OR_RETURN(Stmt q, Stmt::Prepare(db, std::string("SELECT ") + kNodeColumns +
                                                           " FROM nodes WHERE name = ?"));
    q.Bind(1, std::string_view(node.name));
    TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return Internal("node row missing after its upsert");
    TESSERA_ASSIGN_OR_RETURN(api::Node stored, NodeFromRow(q));
    TESSERA_RETURN_IF_ERROR(LoadDevices(db, &stored));
    AfterCommit([this, stored = std::move(stored)]() mutable {
      const std::string name = stored.name;
      CacheNode(name, std::move(stored));
    });
    return Status::Ok();
  });
}

Result<api::Node> SqliteStore::GetNode(std::string_view name) {
  {
    std::lock_guard lock(queue_mu_);
    if (closing_) return Closed();
  }
  {
    std::lock_guard lock(nodes_mu_);
    if (nodes_loaded_) {
      auto it = nodes_.find(std::string(name));
      if (it == nodes_.end()) return NotFound("node " + std::string(name) + " not found");
      return it->second;
    }
  }
  ++node_row_reads_;
  api::Node node;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Stmt q, Stmt::Prepare(db, std::string("SELECT ") + kNodeColumns +
                                                           " FROM nodes WHERE name = ?"));
    q.Bind(1, name);
    TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return NotFound("node " + std::string(name) + " not found");
    TESSERA_ASSIGN_OR_RETURN(node, NodeFromRow(q));
    return LoadDevices(db, &node);
  }));
  return node;
}

Result<std::vector<api::Node>> SqliteStore::ListNodes() {
  std::vector<api::Node> out;
  uint64_t version = 0;
  {
    std::lock_guard lock(queue_mu_);
    if (closing_) return Closed();
  }
  {
    std::lock_guard lock(nodes_mu_);
    if (nodes_loaded_) {
      out.reserve(nodes_.size());
      for (const auto& [name, node] : nodes_) out.push_back(node);
      return out;
    }
    version = nodes_version_;
  }
  ++node_row_reads_;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Stmt q, Stmt::Prepare(db, std::string("SELECT ") + kNodeColumns +
                                                           " FROM nodes ORDER BY name"));
    while (true) {
      TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      TESSERA_ASSIGN_OR_RETURN(api::Node n, NodeFromRow(q));
      out.push_back(std::move(n));
    }
    for (api::Node& n : out) TESSERA_RETURN_IF_ERROR(LoadDevices(db, &n));
    return Status::Ok();
  }));
  std::lock_guard lock(nodes_mu_);
  // Kept only if no node write committed since the read began (it might
  // not show it); otherwise the next listing tries again.
  if (!nodes_loaded_ && nodes_version_ == version) {
    for (const api::Node& n : out) nodes_[n.name] = n;
    nodes_loaded_ = true;
  }
  return out;
}

Status SqliteStore::SetNodeHealth(std::string_view name, std::string_view health) {
  TESSERA_RETURN_IF_ERROR(ValidateNodeHealth(health));
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Stmt up,
                             Stmt::Prepare(db, "UPDATE nodes SET health = ? WHERE name = ?"));
    up.Bind(1, health).Bind(2, name);
    TESSERA_RETURN_IF_ERROR(up.Run());
    if (sqlite3_changes(db) == 0) return NotFound("node " + std::string(name) + " not found");
    AfterCommit([this, node = std::string(name), health = std::string(health)] {
      std::lock_guard lock(nodes_mu_);
      ++nodes_version_;
      auto it = nodes_.find(node);
      if (it != nodes_.end()) it->second.health = health;
    });
    return Status::Ok();
  });
}

// ---------------------------------------------------------------- tokens

Status SqliteStore::InsertToken(const TokenRecord& record) {
  TESSERA_RETURN_IF_ERROR(ValidateTokenRecord(record));
  const TokenInfo& info = record.info;
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt u, Stmt::Prepare(db, "INSERT OR IGNORE INTO users (name, created_ms) VALUES (?, ?)"));
    u.Bind(1, std::string_view(info.user)).Bind(2, info.created_ms);
    TESSERA_RETURN_IF_ERROR(u.Run());
    TESSERA_ASSIGN_OR_RETURN(
        Stmt ins, Stmt::Prepare(db,
                                "INSERT INTO tokens (id, user, role, salt, hash, created_ms, "
                                "revoked_ms) VALUES (?, ?, ?, ?, ?, ?, ?)"));
    ins.Bind(1, std::string_view(info.id))
        .Bind(2, std::string_view(info.user))
        .Bind(3, api::RoleName(info.role))
        .BindBlob(4, record.secret.salt)
        .BindBlob(5, record.secret.hash)
        .Bind(6, info.created_ms)
        .Bind(7, info.revoked_ms);
    return ins.Run();
  });
}

Result<TokenRecord> SqliteStore::GetToken(std::string_view token_id) {
  TokenRecord record;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt q, Stmt::Prepare(db,
                              "SELECT id, user, role, created_ms, revoked_ms, salt, hash "
                              "FROM tokens WHERE id = ?"));
    q.Bind(1, token_id);
    TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return NotFound("token " + std::string(token_id) + " not found");
    TESSERA_ASSIGN_OR_RETURN(record.info, TokenFromRow(q));
    record.secret = SecretDigest{q.Blob(5), q.Blob(6)};
    return Status::Ok();
  }));
  return record;
}

Status SqliteStore::RevokeToken(std::string_view token_id, int64_t now_ms) {
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Stmt q, Stmt::Prepare(db, "SELECT 1 FROM tokens WHERE id = ?"));
    q.Bind(1, token_id);
    TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return NotFound("token " + std::string(token_id) + " not found");
    TESSERA_ASSIGN_OR_RETURN(Stmt up, Stmt::Prepare(db,
                                                    "UPDATE tokens SET revoked_ms = ? "
                                                    "WHERE id = ? AND revoked_ms IS NULL"));
    up.Bind(1, now_ms).Bind(2, token_id);
    return up.Run();
  });
}

Result<std::vector<TokenInfo>> SqliteStore::ListTokens() {
  std::vector<TokenInfo> out;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt q, Stmt::Prepare(db,
                              "SELECT id, user, role, created_ms, revoked_ms FROM tokens "
                              "ORDER BY user, id"));
    while (true) {
      TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      TESSERA_ASSIGN_OR_RETURN(TokenInfo t, TokenFromRow(q));
      out.push_back(std::move(t));
    }
    return Status::Ok();
  }));
  return out;
}

// ---------------------------------------------------------------- entrypoints

Result<std::vector<api::Entrypoint>> SqliteStore::ListEntrypoints() {
  std::vector<api::Entrypoint> out;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Stmt q,
                             Stmt::Prepare(db,
                                           "SELECT name, command, description FROM entrypoints "
                                           "ORDER BY name"));
    while (true) {
      TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      out.push_back(api::Entrypoint{q.Text(0), q.Text(1), q.Text(2)});
    }
    return Status::Ok();
  }));
  return out;
}

Result<api::Entrypoint> SqliteStore::GetEntrypoint(std::string_view name) {
  api::Entrypoint out;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Stmt q,
                             Stmt::Prepare(db,
                                           "SELECT name, command, description FROM entrypoints "
                                           "WHERE name = ?"));
    q.Bind(1, name);
    TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return NotFound("entrypoint " + std::string(name) + " is not allowed");
    out = api::Entrypoint{q.Text(0), q.Text(1), q.Text(2)};
    return Status::Ok();
  }));
  return out;
}

Status SqliteStore::PutEntrypoint(const api::Entrypoint& e) {
  TESSERA_RETURN_IF_ERROR(ValidateEntrypoint(e));
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt up, Stmt::Prepare(db,
                               "INSERT INTO entrypoints (name, command, description) "
                               "VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                               "command = excluded.command, description = excluded.description"));
    up.Bind(1, std::string_view(e.name))
        .Bind(2, std::string_view(e.command))
        .Bind(3, std::string_view(e.description));
    return up.Run();
  });
}

Status SqliteStore::DeleteEntrypoint(std::string_view name) {
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Stmt del, Stmt::Prepare(db, "DELETE FROM entrypoints WHERE name = ?"));
    del.Bind(1, name);
    TESSERA_RETURN_IF_ERROR(del.Run());
    if (sqlite3_changes(db) == 0) {
      return NotFound("entrypoint " + std::string(name) + " not found");
    }
    return Status::Ok();
  });
}

// ---------------------------------------------------------------- join token

Status SqliteStore::PutAgentJoinToken(const SecretDigest& digest) {
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt up, Stmt::Prepare(db,
                               "INSERT INTO agent_join_token (id, salt, hash) VALUES (1, ?, ?) "
                               "ON CONFLICT (id) DO UPDATE SET salt = excluded.salt, "
                               "hash = excluded.hash"));
    up.BindBlob(1, digest.salt).BindBlob(2, digest.hash);
    return up.Run();
  });
}

Result<SecretDigest> SqliteStore::GetAgentJoinToken() {
  SecretDigest digest;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt q, Stmt::Prepare(db, "SELECT salt, hash FROM agent_join_token WHERE id = 1"));
    TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return NotFound("no agent join token is set");
    digest = SecretDigest{q.Blob(0), q.Blob(1)};
    return Status::Ok();
  }));
  return digest;
}

// ---------------------------------------------------------------- node credentials

namespace {

constexpr char kNodeCredentialColumns[] =
    "node, id, enrolled_ms, first_used_ms, revoked_ms, salt, hash FROM node_credentials";

NodeCredentialRecord NodeCredentialFromRow(const Stmt& q) {
  NodeCredentialRecord r;
  r.enrolment.node = q.Text(0);
  r.enrolment.credential_id = q.Text(1);
  r.enrolment.enrolled_ms = q.Int(2);
  r.enrolment.first_used_ms = q.OptInt(3);
  r.enrolment.revoked_ms = q.OptInt(4);
  r.secret = SecretDigest{q.Blob(5), q.Blob(6)};
  return r;
}

Status NotEnrolled(std::string_view node) {
  return NotFound("node " + std::string(node) + " is not enrolled");
}

// The record whose `column` (node or id) is `key`, or nullopt.
Result<std::optional<NodeCredentialRecord>> SelectNodeCredential(sqlite3* db,
                                                                 std::string_view column,
                                                                 std::string_view key) {
  TESSERA_ASSIGN_OR_RETURN(
      Stmt q, Stmt::Prepare(db, std::string("SELECT ") + kNodeCredentialColumns + " WHERE " +
                                    std::string(column) + " = ?"));
  q.Bind(1, key);
  TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return std::optional<NodeCredentialRecord>();
  return std::optional<NodeCredentialRecord>(NodeCredentialFromRow(q));
}

// The enrolment of `node` now, or nullopt.
Result<std::optional<api::NodeEnrolment>> CurrentEnrolment(sqlite3* db, std::string_view node) {
  TESSERA_ASSIGN_OR_RETURN(std::optional<NodeCredentialRecord> record,
                           SelectNodeCredential(db, "node", node));
  if (!record) return std::optional<api::NodeEnrolment>();
  return std::optional<api::NodeEnrolment>(std::move(record->enrolment));
}

Status EnrolmentChanged(std::string_view node) {
  return FailedPrecondition("the enrolment of node " + std::string(node) + " changed meanwhile");
}

}  // namespace

Result<NodeCredentialRecord> SqliteStore::GetNodeCredential(std::string_view node) {
  std::optional<NodeCredentialRecord> record;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(record, SelectNodeCredential(db, "node", node));
    return Status::Ok();
  }));
  if (!record) return NotEnrolled(node);
  return *std::move(record);
}

Result<NodeCredentialRecord> SqliteStore::FindNodeCredential(std::string_view credential_id) {
  std::optional<NodeCredentialRecord> record;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(record, SelectNodeCredential(db, "id", credential_id));
    return Status::Ok();
  }));
  if (!record) return NotFound("no node credential " + std::string(credential_id));
  return *std::move(record);
}

Status SqliteStore::PutNodeCredential(const NodeCredentialRecord& record,
                                      const std::optional<api::NodeEnrolment>& expected) {
  TESSERA_RETURN_IF_ERROR(ValidateNodeCredentialRecord(record));
  const api::NodeEnrolment& e = record.enrolment;
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(std::optional<api::NodeEnrolment> current,
                             CurrentEnrolment(db, e.node));
    if (current != expected) return EnrolmentChanged(e.node);
    TESSERA_ASSIGN_OR_RETURN(
        Stmt up,
        Stmt::Prepare(db,
                      "INSERT INTO node_credentials (node, id, salt, hash, enrolled_ms, "
                      "first_used_ms, revoked_ms) VALUES (?, ?, ?, ?, ?, ?, ?) "
                      "ON CONFLICT (node) DO UPDATE SET id = excluded.id, salt = excluded.salt, "
                      "hash = excluded.hash, enrolled_ms = excluded.enrolled_ms, "
                      "first_used_ms = excluded.first_used_ms, revoked_ms = excluded.revoked_ms"));
    up.Bind(1, std::string_view(e.node))
        .Bind(2, std::string_view(e.credential_id))
        .BindBlob(3, record.secret.salt)
        .BindBlob(4, record.secret.hash)
        .Bind(5, e.enrolled_ms)
        .Bind(6, e.first_used_ms)
        .Bind(7, e.revoked_ms);
    return up.Run();
  });
}

Status SqliteStore::DeleteNodeCredential(const api::NodeEnrolment& expected) {
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(std::optional<api::NodeEnrolment> current,
                             CurrentEnrolment(db, expected.node));
    if (!current) return NotEnrolled(expected.node);
    if (*current != expected) return EnrolmentChanged(expected.node);
    TESSERA_ASSIGN_OR_RETURN(Stmt del,
                             Stmt::Prepare(db, "DELETE FROM node_credentials WHERE node = ?"));
    del.Bind(1, std::string_view(expected.node));
    return del.Run();
  });
}

Result<std::vector<api::NodeEnrolment>> SqliteStore::ListNodeEnrolments() {
  std::vector<api::NodeEnrolment> out;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt q,
        Stmt::Prepare(db, std::string("SELECT ") + kNodeCredentialColumns + " ORDER BY node"));
    while (true) {
      TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      out.push_back(NodeCredentialFromRow(q).enrolment);
    }
    return Status::Ok();
  }));
  return out;
}

Status SqliteStore::RevokeNode(std::string_view node, int64_t now_ms) {
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(std::optional<api::NodeEnrolment> current, CurrentEnrolment(db, node));
    if (!current) return NotEnrolled(node);
    TESSERA_ASSIGN_OR_RETURN(Stmt up, Stmt::Prepare(db,
                                                    "UPDATE node_credentials SET revoked_ms = ? "
                                                    "WHERE node = ? AND revoked_ms IS NULL"));
    up.Bind(1, now_ms).Bind(2, node);
    return up.Run();
  });
}

// ------------------------------------------------------------ infer chunks

namespace {

// Each chunk's items as the JSON text of its `items` column (made before the write
// transaction, so the store's lock is not held for it).
std::vector<std::string> ChunkTexts(const std::vector<std::vector<std::string>>& chunks) {
  std::vector<std::string> texts;
  texts.reserve(chunks.size());
  for (const auto& items : chunks) texts.push_back(*JsonColumn(api::Json(items)));
  return texts;
}

// Inserts `chunks` as pending chunks first_chunk, first_chunk + 1, ...; on an error,
// *failed is the chunk whose insert failed.
Status InsertPendingChunks(sqlite3* db, api::JobId job, int64_t first_chunk,
                           const std::vector<std::vector<std::string>>& chunks,
                           const std::vector<std::string>& texts, int64_t* failed) {
  TESSERA_ASSIGN_OR_RETURN(Stmt ins, Stmt::Prepare(db,
                                                   "INSERT INTO infer_chunks "
                                                   "(job_id, chunk, items, images, state) "
                                                   "VALUES (?, ?, ?, ?, 'pending')"));
  for (size_t i = 0; i < chunks.size(); ++i) {
    const int64_t chunk = first_chunk + static_cast<int64_t>(i);
    ins.Reset()
        .Bind(1, job)
        .Bind(2, chunk)
        .Bind(3, std::string_view(texts[i]))
        .Bind(4, static_cast<int64_t>(chunks[i].size()));
    if (Status st = ins.Run(); !st.ok()) {
      *failed = chunk;
      return st;
    }
  }
  return Status::Ok();
}

}  // namespace

Status SqliteStore::InsertChunks(api::JobId job,
                                 const std::vector<std::vector<std::string>>& chunks) {
  const std::vector<std::string> texts = ChunkTexts(chunks);
  return Write([&](sqlite3* db) -> Status {
    TESSERA_RETURN_IF_ERROR(CheckJobExists(db, job));
    TESSERA_ASSIGN_OR_RETURN(
        Stmt any, Stmt::Prepare(db, "SELECT 1 FROM infer_chunks WHERE job_id = ? LIMIT 1"));
    any.Bind(1, job);
    TESSERA_ASSIGN_OR_RETURN(bool exists, any.Step());
    if (exists) return AlreadyExists("job " + std::to_string(job) + " already has chunks");
    int64_t failed = 0;
    TESSERA_RETURN_IF_ERROR(InsertPendingChunks(db, job, 0, chunks, texts, &failed));
    TESSERA_ASSIGN_OR_RETURN(
        Stmt seal, Stmt::Prepare(db, "UPDATE infer_chunk_counts SET sealed = 1 WHERE job_id = ?"));
    seal.Bind(1, job);
    return seal.Run();
  });
}

Status SqliteStore::AppendChunks(api::JobId job, int64_t first_chunk,
                                 const std::vector<std::vector<std::string>>& chunks) {
  if (first_chunk < 0) return InvalidArgument("must be >= 0", "first_chunk");
  const std::vector<std::string> texts = ChunkTexts(chunks);
  return Write([&](sqlite3* db) -> Status {
    TESSERA_RETURN_IF_ERROR(CheckJobExists(db, job));
    int64_t failed = -1;
    Status st = InsertPendingChunks(db, job, first_chunk, chunks, texts, &failed);
    if (!st.ok() && failed >= 0) {
      return AlreadyExists("job " + std::to_string(job) + " already has chunk " +
                           std::to_string(failed));
    }
    return st;
  });
}

Status SqliteStore::SealChunks(api::JobId job) {
  return Write([&](sqlite3* db) -> Status {
    TESSERA_RETURN_IF_ERROR(CheckJobExists(db, job));
    TESSERA_ASSIGN_OR_RETURN(
        Stmt row,
        Stmt::Prepare(db, "INSERT OR IGNORE INTO infer_chunk_counts (job_id) VALUES (?)"));
    row.Bind(1, job);
    TESSERA_RETURN_IF_ERROR(row.Run());
    TESSERA_ASSIGN_OR_RETURN(
        Stmt seal, Stmt::Prepare(db, "UPDATE infer_chunk_counts SET sealed = 1 WHERE job_id = ?"));
    seal.Bind(1, job);
    return seal.Run();
  });
}

Result<bool> SqliteStore::ChunksSealed(api::JobId job) {
  bool sealed = false;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt q, Stmt::Prepare(db, "SELECT sealed FROM infer_chunk_counts WHERE job_id = ?"));
    q.Bind(1, job);
    TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
    sealed = row && q.Int(0) != 0;
    return Status::Ok();
  }));
  return sealed;
}

Status SqliteStore::DeleteChunks(api::JobId job) {
  return Write([&](sqlite3* db) -> Status {
    for (const char* sql : {"DELETE FROM infer_chunks WHERE job_id = ?",
                            "DELETE FROM infer_chunk_counts WHERE job_id = ?"}) {
      TESSERA_ASSIGN_OR_RETURN(Stmt q, Stmt::Prepare(db, sql));
      q.Bind(1, job);
      TESSERA_RETURN_IF_ERROR(q.Run());
    }
    return Status::Ok();
  });
}

Result<ChunkLeaseResult> SqliteStore::LeaseChunks(const ChunkLeaseRequest& r) {
  TESSERA_RETURN_IF_ERROR(ValidateChunkLeaseRequest(r));
  ChunkLeaseResult out;
  TESSERA_RETURN_IF_ERROR(Write([&](sqlite3* db) -> Status {
    out = ChunkLeaseResult{};
    TESSERA_RETURN_IF_ERROR(CheckJobExists(db, r.job_id));
    TESSERA_ASSIGN_OR_RETURN(Stmt done, Stmt::Prepare(db,
                                                      "UPDATE infer_chunks SET state = 'done', "
                                                      "attempt = ?, rank = ?, done_ms = ? "
                                                      "WHERE job_id = ? AND chunk = ? "
                                                      "AND state <> 'done'"));
    for (int64_t chunk : r.completed) {
      done.Reset()
          .Bind(1, r.attempt)
          .Bind(2, r.rank)
          .Bind(3, r.now_ms)
          .Bind(4, r.job_id)
          .Bind(5, chunk);
      TESSERA_RETURN_IF_ERROR(done.Run());
      out.newly_done += sqlite3_changes(db);
    }
    TESSERA_ASSIGN_OR_RETURN(Stmt renew, Stmt::Prepare(db,
                                                       "UPDATE infer_chunks SET lease_until_ms = ? "
                                                       "WHERE job_id = ? AND state = 'leased' "
                                                       "AND attempt = ? AND rank = ?"));
    renew.Bind(1, r.lease_until_ms).Bind(2, r.job_id).Bind(3, r.attempt).Bind(4, r.rank);
    TESSERA_RETURN_IF_ERROR(renew.Run());
    if (r.max_chunks > 0) {
      // Chunks the rank still holds (an answer it never got) come first,
      // then pending chunks and reclaimable leases, lowest numbers first.
      std::vector<InferChunk> candidates;
      {
        TESSERA_ASSIGN_OR_RETURN(
            Stmt held, Stmt::Prepare(db, "SELECT " + std::string(kChunkColumns) +
                                             " FROM infer_chunks WHERE job_id = ? AND "
                                             "state = 'leased' AND attempt = ? AND rank = ? "
                                             "ORDER BY chunk LIMIT ?"));
        held.Bind(1, r.job_id).Bind(2, r.attempt).Bind(3, r.rank).Bind(4, r.max_chunks);
        while (true) {
          TESSERA_ASSIGN_OR_RETURN(bool row, held.Step());
          if (!row) break;
          TESSERA_ASSIGN_OR_RETURN(InferChunk c, ChunkFromRow(held, r.job_id));
          candidates.push_back(std::move(c));
        }
      }
      const size_t resent = candidates.size();
      for (std::string_view where :
           {"state = 'pending'", "state = 'leased' AND (lease_until_ms <= ? OR attempt < ?)"}) {
        TESSERA_ASSIGN_OR_RETURN(
            Stmt q, Stmt::Prepare(db, "SELECT " + std::string(kChunkColumns) +
                                          " FROM infer_chunks WHERE job_id = ? AND " +
                                          std::string(where) + " ORDER BY chunk LIMIT ?"));
        q.Bind(1, r.job_id);
        if (where == "state = 'pending'") {
          q.Bind(2, r.max_chunks);
        } else {
          q.Bind(2, r.now_ms).Bind(3, r.attempt).Bind(4, r.max_chunks);
        }
        while (true) {
          TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
          if (!row) break;
          TESSERA_ASSIGN_OR_RETURN(InferChunk c, ChunkFromRow(q, r.job_id));
          candidates.push_back(std::move(c));
        }
      }
      std::sort(candidates.begin() + static_cast<std::ptrdiff_t>(resent), candidates.end(),
                [](const InferChunk& a, const InferChunk& b) { return a.chunk < b.chunk; });
      if (candidates.size() > static_cast<size_t>(r.max_chunks)) {
        candidates.resize(static_cast<size_t>(r.max_chunks));
      }
      TESSERA_ASSIGN_OR_RETURN(Stmt lease,
                               Stmt::Prepare(db,
                                             "UPDATE infer_chunks SET state = 'leased', "
                                             "attempt = ?, rank = ?, lease_until_ms = ? "
                                             "WHERE job_id = ? AND chunk = ?"));
      for (InferChunk& c : candidates) {
        lease.Reset()
            .Bind(1, r.attempt)
            .Bind(2, r.rank)
            .Bind(3, r.lease_until_ms)
            .Bind(4, r.job_id)
            .Bind(5, c.chunk);
        TESSERA_RETURN_IF_ERROR(lease.Run());
        c.state = ChunkState::kLeased;
        c.attempt = r.attempt;
        c.rank = r.rank;
        c.lease_until_ms = r.lease_until_ms;
        out.leased.push_back(std::move(c));
      }
    }
    TESSERA_ASSIGN_OR_RETURN(out.counts, CountChunksOn(db, r.job_id));
    return Status::Ok();
  }));
  return out;
}

Result<ChunkCounts> SqliteStore::CountChunks(api::JobId job) {
  ChunkCounts counts;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(counts, CountChunksOn(db, job));
    return Status::Ok();
  }));
  return counts;
}

Result<std::vector<InferChunk>> SqliteStore::ListChunks(api::JobId job) {
  std::vector<InferChunk> out;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    out.clear();
    TESSERA_ASSIGN_OR_RETURN(Stmt q, Stmt::Prepare(db, "SELECT " + std::string(kChunkColumns) +
                                                           " FROM infer_chunks WHERE job_id = ? "
                                                           "ORDER BY chunk"));
    q.Bind(1, job);
    while (true) {
      TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      TESSERA_ASSIGN_OR_RETURN(InferChunk c, ChunkFromRow(q, job));
      out.push_back(std::move(c));
    }
    return Status::Ok();
  }));
  return out;
}

}  // namespace tessera::daemon
