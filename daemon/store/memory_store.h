// MemoryStore: a Store kept in process memory, with SqliteStore's semantics.
//
// Purpose: fast tests and tools that need a store but no file. Nothing
// survives destruction. Ids are assigned from 1 upward like SQLite's.
// Stats(): every write counts as one commit; the histogram stays empty.
//
// Ownership: owns its data. Thread safety: every method takes one mutex (mu_;
// the *Locked helpers require it held).
#ifndef TESSERA_DAEMON_STORE_MEMORY_STORE_H_
#define TESSERA_DAEMON_STORE_MEMORY_STORE_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "daemon/store/store.h"
#include "daemon/store/store_methods.h"

namespace tessera::daemon {

class MemoryStore final : public Store {
 public:
  // Seeded with kBuiltinEntrypoints.
  explicit MemoryStore(MetricsRetention metrics_retention = {});

  Status Health() override;

  // Every row method of the Store (daemon/store/store_methods.h).
  TESSERA_STORE_METHODS(TESSERA_STORE_OVERRIDE)

  StoreStats Stats() override;

 private:
  ChunkCounts CountChunksLocked(api::JobId job) const REQUIRES(mu_);

  // One (job, rank)'s history: points by (step, attempt), thinned as
  // MetricsRetention says.
  struct MetricSeries {
    int64_t max_step = -1;
    int64_t stride = 1;
    int64_t thinned_through = -1;
    std::map<std::pair<int64_t, int64_t>, api::MetricPoint> points;
  };
  void AppendSeriesLocked(MetricSeries& series, const std::vector<const api::MetricPoint*>& points)
      REQUIRES(mu_);

  Mutex mu_;
  api::JobId next_job_id_ GUARDED_BY(mu_) = 1;
  int64_t next_event_id_ GUARDED_BY(mu_) = 1;
  std::map<api::JobId, api::Job> jobs_ GUARDED_BY(mu_);
  std::vector<api::Event> events_ GUARDED_BY(mu_);
  std::map<std::pair<api::JobId, int64_t>, JobAttempt> attempts_ GUARDED_BY(mu_);
  std::map<std::string, api::Node, std::less<>> nodes_ GUARDED_BY(mu_);
  std::map<std::string, TokenRecord, std::less<>> tokens_ GUARDED_BY(mu_);  // by id
  std::map<std::string, api::Entrypoint, std::less<>> entrypoints_ GUARDED_BY(mu_);
  std::optional<SecretDigest> join_token_ GUARDED_BY(mu_);
  std::map<api::JobId, std::vector<InferChunk>> chunks_ GUARDED_BY(mu_);  // by chunk number
  std::set<api::JobId> sealed_ GUARDED_BY(mu_);                           // inputs listed whole
  std::map<std::string, NodeCredentialRecord, std::less<>> node_credentials_
      GUARDED_BY(mu_);  // by node
  const MetricsRetention retention_;
  std::map<std::pair<api::JobId, int64_t>, MetricSeries> metrics_
      GUARDED_BY(mu_);  // by (job, rank)
  uint64_t writes_ GUARDED_BY(mu_) = 0;
};

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_STORE_MEMORY_STORE_H_
