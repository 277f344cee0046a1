// The ControlPlaneService tests' fixture: a ControlPlaneService over a real
// SqliteStore on a temporary file, a fake clock, principals, and builders for
// a job spec and an agent's heartbeat.
#ifndef TESSERA_TESTS_DAEMON_CONTROL_PLANE_SERVICE_FIXTURE_H_
#define TESSERA_TESTS_DAEMON_CONTROL_PLANE_SERVICE_FIXTURE_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/fake_clock.h"
#include "daemon/control_plane_service.h"
#include "daemon/store/sqlite_store.h"
#include "tests/daemon/temp_dir.h"

namespace tessera::daemon {

using api::JobState;
using api::Principal;
using api::Role;

inline const Principal kAlice{"alice", Role::kUser};
inline const Principal kBob{"bob", Role::kUser};
inline const Principal kRoot{"root", Role::kAdmin};

inline api::JobSpec Spec(std::string entrypoint = "builtin:colorize-unet",
                         int64_t max_attempts = 2) {
  api::JobSpec s;
  s.name = "colorize";
  s.entrypoint = std::move(entrypoint);
  s.dataset = "/srv/scans";
  s.global_batch = 32;
  s.steps = 100;
  s.max_attempts = max_attempts;
  return s;
}

class ControlPlaneServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

  void Open(ControlPlaneOptions options = {}) {
    service_.reset();
    store_.reset();
    auto s = SqliteStore::Open(dir_.File("tessera.db"));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    options.heartbeat_interval = std::chrono::milliseconds(1000);
    service_ = std::make_unique<ControlPlaneService>(store_.get(), &clock_, std::move(options));
  }

  api::Job Submit(const Principal& who) {
    auto job = service_->SubmitJob(who, Spec());
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return job.ok() ? *job : api::Job{};
  }

  api::Json HeartbeatJson(const std::string& node, std::vector<api::WorkerStatus> workers = {}) {
    api::HeartbeatRequest r;
    r.node = node;
    r.address = "10.0.0.7";
    r.agent_started_ms = 1;
    api::Device d;
    d.node = node;
    d.index = 0;
    d.name = "emulated-rtx";
    d.uuid = "GPU-1";
    d.type = "cuda";
    d.memory_bytes = 16'000'000'000;
    d.relative_speed = 0.25;
    d.emulated = true;
    r.devices = {d};
    r.workers = std::move(workers);
    return api::ToJson(r);
  }

  static api::WorkerStatus Worker(api::JobId job, int64_t rank, api::Json progress) {
    api::WorkerStatus w;
    w.key = {job, 1, rank};
    w.pid = 100 + rank;
    w.progress = std::move(progress);
    return w;
  }

  testing::TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<ControlPlaneService> service_;
};

}  // namespace tessera::daemon

#endif  // TESSERA_TESTS_DAEMON_CONTROL_PLANE_SERVICE_FIXTURE_H_
