#include "daemon/store/sqlite_schema.h"

#include <string>

#include "daemon/store/sqlite_util.h"

namespace tessera::daemon {
namespace {

// Version 1: the initial schema. Never edit; add a new migration instead.
constexpr std::string_view kMigration1 = R"sql(
CREATE TABLE jobs (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  owner       TEXT    NOT NULL CHECK (owner <> ''),
  name        TEXT    NOT NULL,
  spec        TEXT    NOT NULL,            -- api::JobSpec as JSON
  state       TEXT    NOT NULL CHECK (state IN ('pending', 'planned', 'starting', 'running',
                                 'recovering', 'succeeded', 'failed', 'cancelled')),
  attempt     INTEGER NOT NULL DEFAULT 0,  -- attempts started so far
  reason      TEXT    NOT NULL DEFAULT '', -- reason of the last state change
  plan        TEXT,                        -- chosen plan (JSON) or NULL
  progress    TEXT,                        -- latest progress summary (JSON) or NULL
  created_ms  INTEGER NOT NULL,
  updated_ms  INTEGER NOT NULL
);
CREATE INDEX jobs_by_state ON jobs (state, id);
CREATE INDEX jobs_by_owner ON jobs (owner, id);

CREATE TABLE job_attempts (
  job_id      INTEGER NOT NULL REFERENCES jobs (id),
  attempt     INTEGER NOT NULL CHECK (attempt >= 1),
  plan        TEXT,
  started_ms  INTEGER NOT NULL,
  ended_ms    INTEGER,
  result      TEXT    NOT NULL DEFAULT '',
  PRIMARY KEY (job_id, attempt)
);

-- Append-only: every job state change with its reason.
CREATE TABLE events (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id      INTEGER NOT NULL REFERENCES jobs (id),
  ts_ms       INTEGER NOT NULL,
  from_state  TEXT    NOT NULL,            -- '' for the submission event
  to_state    TEXT    NOT NULL,
  attempt     INTEGER NOT NULL,
  reason      TEXT    NOT NULL
);
CREATE INDEX events_by_job ON events (job_id, id);
CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;

CREATE TABLE nodes (
  name               TEXT    PRIMARY KEY,
  address            TEXT    NOT NULL,
  health             TEXT    NOT NULL CHECK (health IN ('healthy', 'suspect', 'dead')),
  last_heartbeat_ms  INTEGER NOT NULL
);

CREATE TABLE devices (
  node      TEXT    NOT NULL REFERENCES nodes (name) ON DELETE CASCADE,
  idx       INTEGER NOT NULL,
  uuid      TEXT    NOT NULL,
  type      TEXT    NOT NULL,
  emulated  INTEGER NOT NULL,
  detail    TEXT    NOT NULL,              -- api::Device as JSON (source of truth)
  PRIMARY KEY (node, idx)
);

CREATE TABLE users (
  name        TEXT    PRIMARY KEY CHECK (name <> ''),
  created_ms  INTEGER NOT NULL
);

-- API tokens: never the secret, only salt and SHA-256(salt || secret).
CREATE TABLE tokens (
  id          TEXT    PRIMARY KEY,
  user        TEXT    NOT NULL REFERENCES users (name),
  role        TEXT    NOT NULL CHECK (role IN ('user', 'admin')),
  salt        BLOB    NOT NULL,
  hash        BLOB    NOT NULL,
  created_ms  INTEGER NOT NULL,
  revoked_ms  INTEGER
);

CREATE TABLE entrypoints (
  name         TEXT PRIMARY KEY,
  command      TEXT NOT NULL DEFAULT '',
  description  TEXT NOT NULL DEFAULT ''
);
INSERT INTO entrypoints (name, description) VALUES
  ('builtin:colorize-unet', 'built-in model'),
  ('builtin:denoiser-dncnn', 'built-in model'),
  ('builtin:classifier-resnet', 'built-in model'),
  ('builtin:gan-pix2pix', 'built-in model');

-- The agent join token: at most one row, hashed like API tokens.
CREATE TABLE agent_join_token (
  id    INTEGER PRIMARY KEY CHECK (id = 1),
  salt  BLOB NOT NULL,
  hash  BLOB NOT NULL
);
)sql";

// Version 2: inference chunks (api/lease_protocol.h).
constexpr std::string_view kMigration2 = R"sql(
CREATE TABLE infer_chunks (
  job_id          INTEGER NOT NULL REFERENCES jobs (id),
  chunk           INTEGER NOT NULL CHECK (chunk >= 0),
  items           TEXT    NOT NULL,          -- JSON array of item paths
  images          INTEGER NOT NULL,          -- number of items
  state           TEXT    NOT NULL CHECK (state IN ('pending', 'leased', 'done')),
  attempt         INTEGER NOT NULL DEFAULT 0,
  rank            INTEGER NOT NULL DEFAULT -1,
  lease_until_ms  INTEGER NOT NULL DEFAULT 0,
  done_ms         INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (job_id, chunk)
);
CREATE INDEX infer_chunks_by_state ON infer_chunks (job_id, state, chunk);
)sql";

// Version 3: how a node's devices reach each other (api::DeviceLink, JSON).
constexpr std::string_view kMigration3 = R"sql(
ALTER TABLE nodes ADD COLUMN links TEXT NOT NULL DEFAULT '[]';
)sql";

// Version 4: the logical CPU cores of a node's machine (0: unknown).
constexpr std::string_view kMigration4 = R"sql(
ALTER TABLE nodes ADD COLUMN cpu_cores INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 5: a node's link to the other nodes as its agent reports it
// (bytes/s, one-way seconds; bandwidth 0: unknown).
constexpr std::string_view kMigration5 = R"sql(
ALTER TABLE nodes ADD COLUMN network_bandwidth_bytes_per_s REAL NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN network_latency_s REAL NOT NULL DEFAULT 0;
)sql";

// Version 6: each job's metrics history, per rank and attempt, thinned by
// MetricsRetention (daemon/store/store.h); job_metric_series keeps each (job,
// rank)'s highest step, stride and how far its older part is thinned.
constexpr std::string_view kMigration6 = R"sql(
CREATE TABLE job_metrics (
  job_id                       INTEGER NOT NULL REFERENCES jobs (id),
  rank                         INTEGER NOT NULL CHECK (rank >= 0),
  step                         INTEGER NOT NULL CHECK (step >= 0),
  attempt                      INTEGER NOT NULL,
  ts_ms                        INTEGER NOT NULL,
  loss                         REAL,
  samples_per_s                REAL,
  compute_s                    REAL,
  comm_s                       REAL,
  bubble_s                     REAL,
  peak_memory_bytes            INTEGER,
  predicted_peak_memory_bytes  INTEGER,
  PRIMARY KEY (job_id, rank, step, attempt)
) WITHOUT ROWID;
CREATE INDEX job_metrics_by_step ON job_metrics (job_id, step, attempt, rank);

CREATE TABLE job_metric_series (
  job_id           INTEGER NOT NULL REFERENCES jobs (id),
  rank             INTEGER NOT NULL,
  max_step         INTEGER NOT NULL,
  stride           INTEGER NOT NULL CHECK (stride >= 1),
  thinned_through  INTEGER NOT NULL,   -- older steps <= this are thinned to the stride
  PRIMARY KEY (job_id, rank)
) WITHOUT ROWID;
)sql";

// Version 7: each node's own credential (api/node_identity.h): enrolled once
// with the join token, only a salt and SHA-256(salt || secret) kept.
constexpr std::string_view kMigration7 = R"sql(
CREATE TABLE node_credentials (
  node           TEXT    PRIMARY KEY CHECK (node <> ''),
  id             TEXT    NOT NULL UNIQUE,   -- public part of the credential
  salt           BLOB    NOT NULL,
  hash           BLOB    NOT NULL,
  enrolled_ms    INTEGER NOT NULL,
  first_used_ms  INTEGER,                   -- first heartbeat it authenticated
  revoked_ms     INTEGER
);
)sql";

// Version 8: per-job chunk counters, kept by triggers as chunks are
// inserted, leased, done or deleted, so a lease call or a job read reads
// one row instead of counting the job's chunks; `sealed` marks an input
// listed whole (a listing is written in batches).
constexpr std::string_view kMigration8 = R"sql(
CREATE TABLE infer_chunk_counts (
  job_id         INTEGER PRIMARY KEY REFERENCES jobs (id),
  chunks_total   INTEGER NOT NULL DEFAULT 0,
  images_total   INTEGER NOT NULL DEFAULT 0,
  chunks_done    INTEGER NOT NULL DEFAULT 0,
  images_done    INTEGER NOT NULL DEFAULT 0,
  chunks_leased  INTEGER NOT NULL DEFAULT 0,
  sealed         INTEGER NOT NULL DEFAULT 0   -- 1 once the whole input is listed
);
INSERT INTO infer_chunk_counts
  SELECT job_id, COUNT(*), SUM(images),
         SUM(state = 'done'), SUM(CASE WHEN state = 'done' THEN images ELSE 0 END),
         SUM(state = 'leased'), 1
  FROM infer_chunks GROUP BY job_id;
CREATE TRIGGER infer_chunks_counted_insert AFTER INSERT ON infer_chunks BEGIN
  INSERT OR IGNORE INTO infer_chunk_counts (job_id) VALUES (NEW.job_id);
  UPDATE infer_chunk_counts SET
    chunks_total = chunks_total + 1,
    images_total = images_total + NEW.images,
    chunks_done = chunks_done + (NEW.state = 'done'),
    images_done = images_done + (CASE WHEN NEW.state = 'done' THEN NEW.images ELSE 0 END),
    chunks_leased = chunks_leased + (NEW.state = 'leased')
  WHERE job_id = NEW.job_id;
END;
CREATE TRIGGER infer_chunks_counted_update AFTER UPDATE OF state ON infer_chunks
WHEN OLD.state <> NEW.state BEGIN
  UPDATE infer_chunk_counts SET
    chunks_done = chunks_done + (NEW.state = 'done') - (OLD.state = 'done'),
    images_done = images_done + (CASE WHEN NEW.state = 'done' THEN NEW.images ELSE 0 END)
                              - (CASE WHEN OLD.state = 'done' THEN OLD.images ELSE 0 END),
    chunks_leased = chunks_leased + (NEW.state = 'leased') - (OLD.state = 'leased')
  WHERE job_id = NEW.job_id;
END;
CREATE TRIGGER infer_chunks_counted_delete AFTER DELETE ON infer_chunks BEGIN
  UPDATE infer_chunk_counts SET
    chunks_total = chunks_total - 1,
    images_total = images_total - OLD.images,
    chunks_done = chunks_done - (OLD.state = 'done'),
    images_done = images_done - (CASE WHEN OLD.state = 'done' THEN OLD.images ELSE 0 END),
    chunks_leased = chunks_leased - (OLD.state = 'leased')
  WHERE job_id = OLD.job_id;
END;
)sql";

// Version 9: the loopback Gloo link a node's agent measured (bytes/s, one-way
// seconds, a rank's CPU seconds per hop; bandwidth 0: not measured),
// agent/gloo_link_benchmark.h.
constexpr std::string_view kMigration9 = R"sql(
ALTER TABLE nodes ADD COLUMN gloo_bandwidth_bytes_per_s REAL NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN gloo_latency_s REAL NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN gloo_cpu_per_hop_s REAL NOT NULL DEFAULT 0;
)sql";

}  // namespace

const std::vector<std::string_view>& SqliteMigrations() {
  static const std::vector<std::string_view> kMigrations = {kMigration1, kMigration2, kMigration3,
                                                            kMigration4, kMigration5, kMigration6,
                                                            kMigration7, kMigration8, kMigration9};
  return kMigrations;
}

int64_t LatestSqliteSchemaVersion() { return static_cast<int64_t>(SqliteMigrations().size()); }

Result<int64_t> ReadSqliteSchemaVersion(sqlite3* db) {
  TESSERA_ASSIGN_OR_RETURN(Stmt q, Stmt::Prepare(db,
                                                 "SELECT COALESCE(MAX(version), 0) "
                                                 "FROM schema_version"));
  TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
  return row ? q.Int(0) : int64_t{0};
}

Result<int64_t> MigrateSqliteSchema(sqlite3* db, int64_t now_ms,
                                    const std::vector<std::string_view>& migrations) {
  TESSERA_RETURN_IF_ERROR(ExecSql(db,
                                  "CREATE TABLE IF NOT EXISTS schema_version ("
                                  " version INTEGER PRIMARY KEY,"
                                  " applied_ms INTEGER NOT NULL)"));
  TESSERA_ASSIGN_OR_RETURN(int64_t version, ReadSqliteSchemaVersion(db));
  const auto known = static_cast<int64_t>(migrations.size());
  if (version > known) {
    return FailedPrecondition("database schema version " + std::to_string(version) +
                              " is newer than this tesserad knows (" + std::to_string(known) +
                              "); upgrade tesserad or use a matching database");
  }
  for (int64_t v = version + 1; v <= known; ++v) {
    TESSERA_RETURN_IF_ERROR(ExecSql(db, "BEGIN IMMEDIATE"));
    Status s = ExecSql(db, migrations[static_cast<size_t>(v - 1)]);
    if (s.ok()) {
      auto ins =
          Stmt::Prepare(db, "INSERT INTO schema_version (version, applied_ms) VALUES (?, ?)");
      s = ins.ok() ? ins->Bind(1, v).Bind(2, now_ms).Run() : ins.status();
    }
    if (s.ok()) s = ExecSql(db, "COMMIT");
    if (!s.ok()) {
      ExecSql(db, "ROLLBACK").IgnoreError();
      return s.WithPrefix("migration " + std::to_string(v));
    }
  }
  return known;
}

}  // namespace tessera::daemon
