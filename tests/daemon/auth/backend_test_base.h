// The auth checks run over every store backend: a gtest fixture base
// parameterized by backend, with a fresh store per test (a real SQLite file
// in a temporary folder, or the memory store).
#ifndef TESSERA_TESTS_DAEMON_AUTH_BACKEND_TEST_BASE_H_
#define TESSERA_TESTS_DAEMON_AUTH_BACKEND_TEST_BASE_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "daemon/store/memory_store.h"
#include "daemon/store/sqlite_store.h"
#include "tests/daemon/temp_dir.h"

namespace tessera::daemon::auth {

enum class Backend { kSqlite, kMemory };

inline std::string BackendName(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::kSqlite ? "Sqlite" : "Memory";
}

inline auto EveryBackend() { return ::testing::Values(Backend::kSqlite, Backend::kMemory); }

class BackendTestBase : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::kSqlite) {
      auto s = SqliteStore::Open(dir_.File("tessera.db"));
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      store_ = std::move(s).value();
    } else {
      store_ = std::make_unique<MemoryStore>();
    }
  }

  testing::TempDir dir_;
  std::unique_ptr<Store> store_;
};

}  // namespace tessera::daemon::auth

#endif  // TESSERA_TESTS_DAEMON_AUTH_BACKEND_TEST_BASE_H_
