// SqliteStore: the Store on one SQLite file, with group commit.
//
// Open it with SqliteStore::Open(path, options). The file is put in WAL mode
// with synchronous=FULL, foreign keys on and a busy timeout, then migrated
// (daemon/store/sqlite_schema.h; a newer schema is refused).
//
// Writes: one writer thread owns the only write connection. Every write call
// queues an operation and blocks until the batch holding it has committed.
// The writer takes everything queued (up to max_batch), runs each operation
// in its own SAVEPOINT inside one BEGIN IMMEDIATE ... COMMIT, so a failing
// operation is rolled back alone, and then completes every caller at once:
// one fsync per batch, and a write that returned OK is durable. Under
// concurrency, commits() < writes(); Stats() exposes both and a histogram of
// batch transaction time.
//
// Reads: a pool of read-only connections (WAL readers, grown on demand, one
// caller per connection at a time), each read in its own read transaction,
// so readers never wait for the writer.
//
// Node rows are also kept in memory, written through: after the first
// ListNodes, ListNodes and GetNode answer from memory, and every committed
// UpsertNode / SetNodeHealth updates it (in commit order; a batch that fails
// to commit changes nothing). The controller lists every node many times a
// second; this spares it the SQL and the device JSON.
//
// The methods are defined across daemon/store/sqlite_store*.cc, one file per
// concept (jobs, attempts, metrics, nodes, credentials, entrypoints, chunks);
// daemon/README.md lists them.
//
// Ownership: owns its connections and the writer thread. Destruction (or
// Close) completes every queued write, stops the writer and closes the
// connections; later calls return kUnavailable.
// Thread safety: every method may be called from any thread.
// REQUIRES: only one SqliteStore (one process) writes a file at a time.
#ifndef TESSERA_DAEMON_STORE_SQLITE_STORE_H_
#define TESSERA_DAEMON_STORE_SQLITE_STORE_H_

#include <sqlite3.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "daemon/store/latency_histogram.h"
#include "daemon/store/store.h"
#include "daemon/store/store_methods.h"

namespace tessera::daemon {

struct SqliteStoreOptions {
  // Measures commit latency and stamps schema_version rows. Not owned;
  // nullptr means SystemClock::Default().
  Clock* clock = nullptr;
  int busy_timeout_ms = 5000;
  // Most write operations per transaction.
  size_t max_batch = 1024;
  std::vector<double> commit_histogram_bounds = LatencyHistogram::DefaultBounds();
  // How each job's metrics history is thinned (daemon/store/store.h).
  MetricsRetention metrics_retention;
};

class SqliteStore final : public Store {
 public:
  // Opens (creating if missing) and migrates the database at `path`.
  // kFailedPrecondition for a schema newer than this build knows;
  // kInternal / kUnavailable for files SQLite cannot open or lock.
  static Result<std::unique_ptr<SqliteStore>> Open(const std::string& path,
                                                   SqliteStoreOptions options = {});

  ~SqliteStore() override;
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  // Completes queued writes, stops the writer, closes idle connections.
  // Idempotent.
  void Close() EXCLUDES(queue_mu_, pool_mu_);

  const std::string& path() const { return path_; }
  // The schema version of the open database.
  int64_t schema_version() const { return schema_version_; }
  // Write calls waiting for their commit (queued or in the running batch).
  int64_t pending_writes() const { return pending_writes_.load(); }
  // Times ListNodes or GetNode read node rows from the database (not from
  // memory); for tests.
  int64_t node_row_reads() const { return node_row_reads_.load(); }

  Status Health() override;

  // Every row method of the Store (daemon/store/store_methods.h).
  TESSERA_STORE_METHODS(TESSERA_STORE_OVERRIDE)

  StoreStats Stats() override;

 private:
  using WriteFn = std::function<Status(sqlite3*)>;
  struct WriteOp {
    WriteFn fn;
    std::promise<Status> done;
  };

  SqliteStore(std::string path, SqliteStoreOptions options, sqlite3* writer, int64_t version);

  // Queues fn for the writer thread and waits until its batch committed.
  Status Write(WriteFn fn) EXCLUDES(queue_mu_);
  // Runs fn on a pooled read connection inside a read transaction.
  Status Read(const std::function<Status(sqlite3*)>& fn) EXCLUDES(queue_mu_, pool_mu_);
  Result<sqlite3*> AcquireReader() EXCLUDES(pool_mu_);
  void ReleaseReader(sqlite3* db) EXCLUDES(pool_mu_);
  void WriterLoop() EXCLUDES(queue_mu_);
  void RunBatch(std::vector<WriteOp>& batch);
  // Inside a write fn (the writer thread): runs `action` once the batch has
  // committed, after the actions of earlier operations; dropped when the
  // operation fails or the batch does not commit.
  void AfterCommit(std::function<void()> action);
  // The committed node row `name` (or its absence) into the in-memory rows.
  void CacheNode(const std::string& name, std::optional<api::Node> row) EXCLUDES(nodes_mu_);

  const std::string path_;
  const SqliteStoreOptions options_;
  Clock* const clock_;
  sqlite3* writer_db_;  // used by the writer thread only
  const int64_t schema_version_;

  Mutex queue_mu_;
  std::condition_variable_any queue_cv_;
  std::deque<WriteOp> queue_ GUARDED_BY(queue_mu_);
  bool closing_ GUARDED_BY(queue_mu_) = false;
  std::thread writer_;

  Mutex pool_mu_;
  std::vector<sqlite3*> idle_readers_ GUARDED_BY(pool_mu_);
  bool pool_closed_ GUARDED_BY(pool_mu_) = false;

  std::vector<std::function<void()>> after_commit_;  // writer thread only

  // Node rows in memory (see the class comment).
  Mutex nodes_mu_;
  bool nodes_loaded_ GUARDED_BY(nodes_mu_) = false;
  uint64_t nodes_version_ GUARDED_BY(nodes_mu_) = 0;              // committed node writes
  std::map<std::string, api::Node> nodes_ GUARDED_BY(nodes_mu_);  // by name
  std::atomic<int64_t> node_row_reads_{0};

  LatencyHistogram commit_latency_;
  std::atomic<uint64_t> commits_{0};
  std::atomic<uint64_t> writes_{0};
  std::atomic<int64_t> pending_writes_{0};
};

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_STORE_SQLITE_STORE_H_
