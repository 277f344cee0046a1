// SQLite-only behaviour: migrations, durability across re-open, group commit,
// concurrency, secrets never on disk, error mapping.
#include "daemon/store/sqlite_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <set>
#include <thread>
#include <vector>

#include "daemon/store/sqlite_schema.h"
#include "tests/daemon/temp_dir.h"

namespace tessera::daemon {
namespace {

// A raw connection for inspecting or tampering with the file from outside.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
    sqlite3_busy_timeout(db_, 5000);
  }
  ~RawDb() { sqlite3_close(db_); }
  void Exec(const std::string& sql) {
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
        << (err ? err : "") << " in " << sql;
    sqlite3_free(err);
  }
  int ExecRc(const std::string& sql) {
    return sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  }
  std::string Scalar(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql;
    std::string out;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != nullptr) {
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
};

api::JobSpec Spec(std::string name) {
  api::JobSpec s;
  s.name = std::move(name);
  s.entrypoint = "builtin:denoiser-dncnn";
  s.global_batch = 8;
  s.steps = 10;
  return s;
}

std::unique_ptr<SqliteStore> OpenOrDie(const std::string& path, SqliteStoreOptions o = {}) {
  auto s = SqliteStore::Open(path, o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

class SqliteStoreTest : public ::testing::Test {
 protected:
  std::string Path() const { return dir_.File("tessera.db"); }
  // Writes the file as tesserad did at schema `version` (the first `version`
  // migrations only), then runs `rows` on it.
  void WriteOldFile(int version, const std::vector<std::string>& rows) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(Path().c_str(), &db), SQLITE_OK);
    const std::vector<std::string_view> old(SqliteMigrations().begin(),
                                            SqliteMigrations().begin() + version);
    ASSERT_EQ(*MigrateSqliteSchema(db, 1, old), version);
    sqlite3_close(db);
    RawDb raw(Path());
    for (const std::string& sql : rows) raw.Exec(sql);
  }
  testing::TempDir dir_;
};

TEST_F(SqliteStoreTest, FileIsInWalModeAndMigrated) {
  auto store = OpenOrDie(Path());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), LatestSqliteSchemaVersion());
  RawDb raw(Path());
  EXPECT_EQ(raw.Scalar("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw.Scalar("SELECT MAX(version) FROM schema_version"),
            std::to_string(LatestSqliteSchemaVersion()));
  EXPECT_EQ(raw.Scalar("SELECT COUNT(*) FROM schema_version"),
            std::to_string(LatestSqliteSchemaVersion()));
  EXPECT_EQ(raw.Scalar("SELECT COUNT(*) FROM entrypoints WHERE name LIKE 'builtin:%'"), "4");
}

TEST_F(SqliteStoreTest, ReopeningIsIdempotent) {
  api::JobId id = 0;
  {
    auto store = OpenOrDie(Path());
    ASSERT_NE(store, nullptr);
    id = store->InsertJob(NewJob{"alice", Spec("keep"), 1, "submitted"})->id;
  }
  for (int i = 0; i < 2; ++i) {
    auto store = OpenOrDie(Path());
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->GetJob(id)->spec.name, "keep");
    EXPECT_EQ(store->ListEntrypoints()->size(), 4u) << "seed rows not inserted twice";
  }
  RawDb raw(Path());
  EXPECT_EQ(raw.Scalar("SELECT COUNT(*) FROM schema_version"),
            std::to_string(LatestSqliteSchemaVersion()));
}

TEST_F(SqliteStoreTest, RefusesANewerSchema) {
  { ASSERT_NE(OpenOrDie(Path()), nullptr); }
  {
    RawDb raw(Path());
    raw.Exec("INSERT INTO schema_version (version, applied_ms) VALUES (999, 0)");
  }
  auto store = SqliteStore::Open(Path());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("999"), std::string::npos);
  EXPECT_NE(store.status().message().find("newer"), std::string::npos);
}

TEST_F(SqliteStoreTest, MigrationsApplyInOrderAndOnlyOnce) {
  RawDb raw(Path());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(Path().c_str(), &db), SQLITE_OK);
  const std::vector<std::string_view> v1 = {"CREATE TABLE a (x INTEGER)"};
  const std::vector<std::string_view> v2 = {"CREATE TABLE a (x INTEGER)",
                                            "INSERT INTO a VALUES (7)"};
  EXPECT_EQ(*MigrateSqliteSchema(db, 1, v1), 1);
  EXPECT_EQ(*MigrateSqliteSchema(db, 2, v2), 2);
  EXPECT_EQ(*MigrateSqliteSchema(db, 3, v2), 2);
  EXPECT_EQ(raw.Scalar("SELECT COUNT(*) FROM a"), "1");
  // A failing migration leaves no trace and reports its number.
  const std::vector<std::string_view> bad = {v2[0], v2[1], "CREATE TABLE a (y INTEGER)"};
  auto failed = MigrateSqliteSchema(db, 4, bad);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("migration 3"), std::string::npos);
  EXPECT_EQ(*ReadSqliteSchemaVersion(db), 2);
  sqlite3_close(db);
}

TEST_F(SqliteStoreTest, ChunkCountsAreCountersKeptByTheStoreAndBackfilledOnUpgrade) {
  // A schema-7 database with an infer job's chunks, some done and leased.
  ASSERT_NO_FATAL_FAILURE(WriteOldFile(
      7, {"INSERT INTO jobs (id, owner, name, spec, state, attempt, created_ms, updated_ms) "
          "VALUES (1, 'alice', 'old', '{}', 'running', 1, 1, 1)",
          "INSERT INTO infer_chunks (job_id, chunk, items, images, state) VALUES "
          "(1, 0, '[\"a\",\"b\"]', 2, 'done'), (1, 1, '[\"c\"]', 1, 'leased'), "
          "(1, 2, '[\"d\"]', 1, 'pending')"}));
  auto store = OpenOrDie(Path());
  ASSERT_NE(store, nullptr);
  RawDb raw(Path());
  // The counters row is what a lease call and a job read use.
  EXPECT_EQ(raw.Scalar("SELECT chunks_total || ' ' || images_total || ' ' || chunks_done || ' ' "
                       "|| images_done || ' ' || chunks_leased FROM infer_chunk_counts "
                       "WHERE job_id = 1"),
            "3 4 1 2 1");
  auto counts = store->CountChunks(1);
  ASSERT_TRUE(counts.ok()) << counts.status().ToString();
  EXPECT_EQ(*counts, (ChunkCounts{3, 1, 1, 4, 2}));
  // Leasing and completing moves the counters with the chunks.
  ChunkLeaseRequest lease{1, 1, 0, {1}, 1, 10, 1000};
  auto leased = store->LeaseChunks(lease);
  ASSERT_TRUE(leased.ok()) << leased.status().ToString();
  EXPECT_EQ(leased->counts, (ChunkCounts{3, 2, 1, 4, 3}));
  ChunkLeaseRequest finish{1, 1, 0, {2}, 0, 20, 1000};
  auto done = store->LeaseChunks(finish);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->counts, (ChunkCounts{3, 3, 0, 4, 4}));
  EXPECT_EQ(*store->CountChunks(1), done->counts);
  // A job without chunks has a zero count, not an error.
  EXPECT_EQ(*store->CountChunks(42), ChunkCounts{});
}

// After the first listing, node rows come from memory, and every committed
// node write reaches that memory: each step's listing equals what a fresh
// open reads from the file.
TEST_F(SqliteStoreTest, NodeRowsAreListedFromMemoryAndFollowEveryCommittedWrite) {
  auto node = [](const std::string& name, int devices) {
    api::Node n;
    n.name = name;
    n.address = "10.0.0.1";
    n.last_heartbeat_ms = 5;
    for (int i = 0; i < devices; ++i) {
      api::Device d;
      d.index = i;
      d.name = "emulated";
      d.type = "cuda";
      d.memory_bytes = 1 << 30;
      n.devices.push_back(d);
    }
    return n;
  };
  struct Step {
    std::string name;
    std::function<Status(SqliteStore*)> write;
    bool ok;
  };
  const std::vector<Step> steps = {
      {"a second node", [&](SqliteStore* s) { return s->UpsertNode(node("b", 1)); }, true},
      {"a health change", [](SqliteStore* s) { return s->SetNodeHealth("a", "dead"); }, true},
      {"new devices",
       [&](SqliteStore* s) {
         api::Node a = node("a", 2);
         a.last_heartbeat_ms = 9;
         return s->UpsertNode(a);
       },
       true},
      {"an unknown node's health", [](SqliteStore* s) { return s->SetNodeHealth("zz", "dead"); },
       false},
      {"an invalid row",
       [&](SqliteStore* s) {
         api::Node bad = node("b", 2);
         bad.devices[1].index = 0;
         return s->UpsertNode(bad);
       },
       false},
  };
  auto listing = [](SqliteStore* s) {
    auto nodes = s->ListNodes();
    EXPECT_TRUE(nodes.ok()) << nodes.status().ToString();
    api::Json out = api::Json::array();
    if (nodes.ok()) {
      for (const api::Node& n : *nodes) out.push_back(api::ToJson(n));
    }
    return out;
  };
  {
    auto store = OpenOrDie(Path());
    ASSERT_TRUE(store->UpsertNode(node("a", 1)).ok());
    EXPECT_EQ(listing(store.get()).size(), 1u);
    EXPECT_EQ(store->node_row_reads(), 1);
  }
  for (const Step& step : steps) {
    api::Json remembered;
    {
      auto store = OpenOrDie(Path());
      listing(store.get());  // loads the rows
      EXPECT_EQ(step.write(store.get()).ok(), step.ok) << step.name;
      remembered = listing(store.get());
      EXPECT_EQ(api::ToJson(*store->GetNode("a")), remembered[0]) << step.name;
      EXPECT_EQ(store->node_row_reads(), 1) << step.name << ": listed from memory";
    }
    auto reopened = OpenOrDie(Path());
    EXPECT_EQ(listing(reopened.get()), remembered) << step.name;
  }
  auto store = OpenOrDie(Path());
  auto a = store->GetNode("a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->devices.size(), 2u);
  EXPECT_EQ(a->health, "healthy");
  EXPECT_EQ(a->last_heartbeat_ms, 9);
  store->Close();
  EXPECT_EQ(store->ListNodes().status().code(), StatusCode::kUnavailable);
}

TEST_F(SqliteStoreTest, SchemaFourNodesGainAnUnknownNetworkLink) {
  // A database tesserad wrote before nodes reported their network link.
  ASSERT_NO_FATAL_FAILURE(WriteOldFile(
      4, {"INSERT INTO nodes (name, address, health, last_heartbeat_ms, links, cpu_cores) "
          "VALUES ('old', '10.0.0.9', 'healthy', 5, '[]', 8)"}));
  auto store = OpenOrDie(Path());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), LatestSqliteSchemaVersion());
  auto old = store->GetNode("old");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->cpu_cores, 8);
  EXPECT_EQ(old->network.bandwidth_bytes_per_s, 0) << "unknown until its agent reports one";
  EXPECT_EQ(old->network.latency_s, 0);
  EXPECT_EQ(old->gloo_link.bandwidth_bytes_per_s, 0) << "not measured until its agent reports one";
  EXPECT_EQ(old->gloo_link.cpu_per_hop_s, 0);
  api::Node n = *old;
  n.network.bandwidth_bytes_per_s = 1.25e9;
  n.network.latency_s = 50e-6;
  ASSERT_TRUE(store->UpsertNode(n).ok());
  EXPECT_DOUBLE_EQ(store->GetNode("old")->network.bandwidth_bytes_per_s, 1.25e9);
}

TEST_F(SqliteStoreTest, SchemaFiveJobsGainAnEmptyMetricsHistory) {
  // A database tesserad wrote before it kept metrics history (schema 5).
  ASSERT_NO_FATAL_FAILURE(WriteOldFile(
      5, {"INSERT INTO jobs (owner, name, spec, state, attempt, reason, progress, created_ms, "
          "updated_ms) VALUES ('alice', 'old', '{\"name\":\"old\"}', 'running', 1, '', "
          "'{\"step\":7}', 1, 1)"}));
  auto store = OpenOrDie(Path());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), LatestSqliteSchemaVersion());
  api::MetricsQuery q;
  q.job_id = 1;
  EXPECT_TRUE(store->ListMetrics(q)->points.empty()) << "no history before the upgrade";
  EXPECT_EQ(store->GetJob(1)->progress, (api::Json{{"step", 7}}));
  api::MetricPoint p;
  p.step = 8;
  p.attempt = 1;
  ASSERT_TRUE(store->RecordProgress(ProgressReport{{}, {{1, p}}}).ok());
  EXPECT_EQ(store->ListMetrics(q)->points.size(), 1u);
  RawDb raw(Path());
  EXPECT_EQ(raw.Scalar("SELECT stride FROM job_metric_series WHERE job_id = 1"), "1");
}

TEST_F(SqliteStoreTest, DataSurvivesCloseAndReopen) {
  api::JobId id = 0;
  TokenRecord token;
  SecretDigest join;
  {
    auto store = OpenOrDie(Path());
    ASSERT_NE(store, nullptr);
    id = store->InsertJob(NewJob{"alice", Spec("durable"), 5, "submitted"})->id;
    ASSERT_TRUE(
        store
            ->TransitionJob(JobTransition{id, api::JobState::kPending, api::JobState::kPlanned,
                                          "planned", 0, api::Json{{"layout", "data"}}, 6})
            .ok());
    token = *store->GetToken(store->CreateToken("alice", api::Role::kUser, 7)->info.id);
    api::Node n;
    n.name = "boxA";
    n.devices.push_back(api::Device{});
    n.devices[0].emulated = true;
    ASSERT_TRUE(store->UpsertNode(n).ok());
    ASSERT_TRUE(store->SetAgentJoinToken("join").ok());
    join = *store->GetAgentJoinToken();
    ASSERT_TRUE(store->PutEntrypoint({"cmd:x", "/bin/true", ""}).ok());
  }
  auto store = OpenOrDie(Path());
  ASSERT_NE(store, nullptr);
  auto job = store->GetJob(id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, api::JobState::kPlanned);
  EXPECT_EQ(job->plan, (api::Json{{"layout", "data"}}));
  EXPECT_EQ(store->ListEvents(id, 0, 10)->size(), 2u);
  EXPECT_EQ(*store->GetToken(token.info.id), token) << "the row, digest included";
  EXPECT_TRUE(store->GetNode("boxA")->devices.at(0).emulated);
  EXPECT_EQ(*store->GetAgentJoinToken(), join);
  EXPECT_TRUE(store->GetEntrypoint("cmd:x").ok());
}

TEST_F(SqliteStoreTest, PlaintextSecretsNeverReachTheFile) {
  std::string token_id, secret;
  {
    auto store = OpenOrDie(Path());
    ASSERT_NE(store, nullptr);
    auto issued = store->CreateToken("alice", api::Role::kAdmin, 1);
    ASSERT_TRUE(issued.ok());
    token_id = issued->info.id;
    secret = issued->plaintext.substr(issued->plaintext.rfind('_') + 1);
    ASSERT_TRUE(store->SetAgentJoinToken("very-secret-join-token-0123").ok());
    // While open: main file, -wal and -shm.
    const std::string bytes = dir_.AllBytes();
    EXPECT_NE(bytes.find(token_id), std::string::npos) << "the scan sees the token row";
    EXPECT_EQ(bytes.find(secret), std::string::npos);
    EXPECT_EQ(bytes.find("very-secret-join-token-0123"), std::string::npos);
  }
  const std::string bytes = dir_.AllBytes();  // after close and checkpoint
  EXPECT_NE(bytes.find(token_id), std::string::npos);
  EXPECT_EQ(bytes.find(secret), std::string::npos);
  EXPECT_EQ(bytes.find("very-secret-join-token-0123"), std::string::npos);
}

TEST_F(SqliteStoreTest, ConcurrentWritersAreAllAcknowledgedAndDurable) {
  constexpr int kThreads = 16;
  constexpr int kPerThread = 40;
  std::vector<std::vector<api::JobId>> ids(kThreads);
  StoreStats stats;
  {
    auto store = OpenOrDie(Path());
    ASSERT_NE(store, nullptr);
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          auto job = store->InsertJob(
              NewJob{"user" + std::to_string(t), Spec(std::to_string(i)), i, "submitted"});
          if (job.ok()) {
            ids[t].push_back(job->id);
          } else {
            ++failures;
          }
        }
      });
    }
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
    stats = store->Stats();
  }
  EXPECT_EQ(stats.writes, static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_LT(stats.commits, stats.writes) << "group commit batches concurrent writes";
  EXPECT_EQ(stats.commit_seconds.count, stats.commits);

  auto store = OpenOrDie(Path());
  ASSERT_NE(store, nullptr);
  std::set<api::JobId> unique;
  for (int t = 0; t < kThreads; ++t) {
    for (api::JobId id : ids[t]) {
      unique.insert(id);
      auto job = store->GetJob(id);
      ASSERT_TRUE(job.ok()) << "acknowledged job " << id << " missing after re-open";
      EXPECT_EQ(job->owner, "user" + std::to_string(t));
    }
  }
  EXPECT_EQ(unique.size(), static_cast<size_t>(kThreads * kPerThread));
  EXPECT_EQ(store->CountJobsByState()->at(api::JobState::kPending), kThreads * kPerThread);
}

// Deterministic batching: while another connection holds the write lock,
// every queued write waits; when it is released, they commit together.
TEST_F(SqliteStoreTest, GroupCommitPutsQueuedWritesInOneTransaction) {
  auto store = OpenOrDie(Path());
  ASSERT_NE(store, nullptr);
  RawDb blocker(Path());
  blocker.Exec("BEGIN IMMEDIATE");
  const StoreStats before = store->Stats();
  constexpr int kWriters = 32;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < kWriters; ++i) {
    threads.emplace_back([&, i] {
      if (store->InsertJob(NewJob{"u", Spec(std::to_string(i)), 1, "submitted"}).ok()) ++ok;
    });
  }
  // Wait until every writer waits: in the writer's blocked batch or queued.
  while (store->pending_writes() < kWriters) std::this_thread::yield();
  blocker.Exec("COMMIT");
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), kWriters);
  const StoreStats after = store->Stats();
  EXPECT_EQ(after.writes - before.writes, static_cast<uint64_t>(kWriters));
  EXPECT_LE(after.commits - before.commits, 2u);
}

TEST_F(SqliteStoreTest, BusyDatabaseIsUnavailable) {
  SqliteStoreOptions o;
  o.busy_timeout_ms = 20;
  auto store = OpenOrDie(Path(), o);
  ASSERT_NE(store, nullptr);
  RawDb blocker(Path());
  blocker.Exec("BEGIN IMMEDIATE");
  auto job = store->InsertJob(NewJob{"u", Spec("busy"), 1, "submitted"});
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kUnavailable);
  blocker.Exec("COMMIT");
  EXPECT_TRUE(store->InsertJob(NewJob{"u", Spec("free"), 1, "submitted"}).ok());
  api::JobQuery q;
  EXPECT_EQ(store->ListJobs(q)->jobs.size(), 1u) << "the refused write left nothing behind";
}

TEST_F(SqliteStoreTest, FailedOperationDoesNotSpoilItsBatch) {
  auto store = OpenOrDie(Path());
  ASSERT_NE(store, nullptr);
  auto job = store->InsertJob(NewJob{"u", Spec("j"), 1, "submitted"});
  ASSERT_TRUE(job.ok());
  RawDb blocker(Path());
  blocker.Exec("BEGIN IMMEDIATE");
  std::thread good([&] {
    EXPECT_TRUE(store->InsertAttempt(JobAttempt{job->id, 1, {}, 1, {}, ""}).ok());
  });
  std::thread bad([&] {
    EXPECT_EQ(store->InsertAttempt(JobAttempt{999, 1, {}, 1, {}, ""}).code(),
              StatusCode::kNotFound);
  });
  while (store->pending_writes() < 2) std::this_thread::yield();
  blocker.Exec("COMMIT");
  good.join();
  bad.join();
  EXPECT_EQ(store->ListAttempts(job->id)->size(), 1u);
}

TEST_F(SqliteStoreTest, EventsAreAppendOnly) {
  auto store = OpenOrDie(Path());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->InsertJob(NewJob{"u", Spec("j"), 1, "submitted"}).ok());
  RawDb raw(Path());
  EXPECT_NE(raw.ExecRc("UPDATE events SET reason = 'rewritten'"), SQLITE_OK);
  EXPECT_NE(raw.ExecRc("DELETE FROM events"), SQLITE_OK);
  EXPECT_EQ(raw.Scalar("SELECT reason FROM events"), "submitted");
}

TEST_F(SqliteStoreTest, ClosedStoreIsUnavailable) {
  auto store = OpenOrDie(Path());
  ASSERT_NE(store, nullptr);
  store->Close();
  EXPECT_EQ(store->Health().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store->InsertJob(NewJob{"u", Spec("j"), 1, "submitted"}).status().code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(store->GetJob(1).status().code(), StatusCode::kUnavailable);
  store->Close();  // idempotent
}

TEST_F(SqliteStoreTest, UnopenablePathIsAnError) {
  auto store = SqliteStore::Open(dir_.File("no/such/dir/tessera.db"));
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().code(), StatusCode::kOk);
}

}  // namespace
}  // namespace tessera::daemon
