// The fixture of the Store suite (tests/daemon/store/store_*test.cc): every test
// runs over each backend, SQLite on a temporary file, memory, and the
// fault-injecting wrapper with no fault armed. store_test.cc instantiates it;
// the other files add tests by concept (metrics history, inference chunks).
#ifndef TESSERA_TESTS_DAEMON_STORE_STORE_TEST_FIXTURE_H_
#define TESSERA_TESTS_DAEMON_STORE_STORE_TEST_FIXTURE_H_

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "daemon/store/faulty_store.h"
#include "daemon/store/memory_store.h"
#include "daemon/store/sqlite_store.h"
#include "daemon/store/store.h"
#include "tests/daemon/temp_dir.h"

namespace tessera::daemon::store_test {

enum class Backend { kSqlite, kMemory, kFaultyMemory };

inline std::string BackendName(const ::testing::TestParamInfo<Backend>& info) {
  switch (info.param) {
    case Backend::kSqlite:
      return "Sqlite";
    case Backend::kMemory:
      return "Memory";
    case Backend::kFaultyMemory:
      return "FaultyOverMemory";
  }
  return "Unknown";
}

inline api::JobSpec Spec(std::string name, int64_t max_attempts = 3) {
  api::JobSpec s;
  s.name = std::move(name);
  s.entrypoint = "builtin:colorize-unet";
  s.dataset = "/srv/archive/scans";
  s.global_batch = 64;
  s.steps = 100;
  s.max_attempts = max_attempts;
  s.args = {"--lr", "0.001"};
  s.env = {{"FOO", "bar"}};
  return s;
}

inline api::Device Dev(int64_t index, bool emulated) {
  api::Device d;
  d.index = index;
  d.name = emulated ? "emulated-a100" : "cpu";
  d.uuid = "uuid-" + std::to_string(index);
  d.type = emulated ? "cuda" : "cpu";
  d.memory_bytes = 80'000'000'000;
  d.relative_speed = 0.5;
  d.emulated = emulated;
  return d;
}

// A small metrics retention, so thinning shows after a few hundred steps.
inline constexpr MetricsRetention kRetention{.recent_steps = 20, .older_points = 8};

inline SqliteStoreOptions SqliteOptions() {
  SqliteStoreOptions o;
  o.metrics_retention = kRetention;
  return o;
}

class StoreTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    switch (GetParam()) {
      case Backend::kSqlite: {
        auto s = SqliteStore::Open(dir_.File("tessera.db"), SqliteOptions());
        ASSERT_TRUE(s.ok()) << s.status().ToString();
        owned_ = std::move(s).value();
        store_ = owned_.get();
        break;
      }
      case Backend::kMemory:
        owned_ = std::make_unique<MemoryStore>(kRetention);
        store_ = owned_.get();
        break;
      case Backend::kFaultyMemory:
        owned_ = std::make_unique<MemoryStore>(kRetention);
        faulty_ = std::make_unique<FaultyStore>(owned_.get());
        store_ = faulty_.get();
        break;
    }
  }

  // SQLite: closes the file and opens it again (what a restarted tesserad
  // reads); the in-memory backends keep what they hold.
  void Reopen() {
    if (GetParam() != Backend::kSqlite) return;
    owned_.reset();
    auto s = SqliteStore::Open(dir_.File("tessera.db"), SqliteOptions());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    owned_ = std::move(s).value();
    store_ = owned_.get();
  }

  api::Job Insert(const std::string& owner, const std::string& name, int64_t now = 1000) {
    auto job = store_->InsertJob(NewJob{owner, Spec(name), now, "submitted"});
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return job.ok() ? *job : api::Job{};
  }

  Result<api::Job> Move(api::JobId id, api::JobState from, api::JobState to, std::string reason,
                        int64_t attempt = 0, std::optional<api::Json> plan = std::nullopt) {
    return store_->TransitionJob(
        JobTransition{id, from, to, std::move(reason), attempt, std::move(plan), 2000});
  }

  testing::TempDir dir_;
  std::unique_ptr<Store> owned_;
  std::unique_ptr<FaultyStore> faulty_;
  Store* store_ = nullptr;
};

}  // namespace tessera::daemon::store_test

#endif  // TESSERA_TESTS_DAEMON_STORE_STORE_TEST_FIXTURE_H_
