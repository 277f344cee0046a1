// Sharing the lab on a real cluster (tesserad, two agents, the real worker):
// alice's training job takes both devices; when bob's arrives, the share
// policy shrinks alice's job in place (scheduler/share_policy.h,
// daemon/controller/job_controller_share.cc) and bob's starts on the device
// it gave up, while alice's trains on in the same attempt.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "tests/integration/harness.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kOneDevice = InventoryYaml({{1, "A (emulated)", "8GiB", 0.5}});

api::Json Training(const std::string& name, const fs::path& images) {
  return {{"name", name},
          {"entrypoint", "builtin:colorize-unet"},
          {"dataset", images.string()},
          {"global_batch", 6},
          {"steps", 100000},
          {"checkpoint_every_s", 5},
          {"min_devices", 1},
          {"layout", "data"},
          {"args", {"--image-size", "32", "--width", "8"}}};
}

int64_t NewestStep(Cluster& cluster, api::JobId id) {
  int64_t newest = 0;
  const api::Json points =
      cluster.GetJson("/api/v1/jobs/" + std::to_string(id) + "/metrics?attempt=1&limit=5000")
          .value("points", api::Json::array());
  for (const api::Json& p : points) newest = std::max(newest, p.value("step", int64_t{0}));
  return newest;
}

TEST(ShareE2ETest, ARunningJobShrinksForAnotherUsersJobAndBothTrainOn) {
  Cluster cluster("real-share");
  const fs::path shared = cluster.dir() / "data" / "shared";
  const fs::path images = shared / "images";
  ASSERT_EQ(GenImages(images, 32, 32), "");
  ASSERT_TRUE(cluster.StartWorkerLab(
      {{"nodea", kOneDevice}, {"nodeb", kOneDevice}},
      "data_roots:\n  - {path: \"" + shared.string() + "\", access: read}\n", 30s));
  const std::string alice = cluster.UserToken("alice");
  const std::string bob = cluster.UserToken("bob");

  int status = 0;
  const api::Json first =
      cluster.PostJson("/api/v1/jobs", Training("alice-colorize", images), &status, alice);
  ASSERT_EQ(status, 201) << first.dump();
  const api::JobId a = first.value("id", api::JobId{0});
  // Pending while tesserad profiles the model, then running on both nodes.
  ASSERT_TRUE(WaitFor([&] { return cluster.PlannedNodes(a).size() == 2; }, 300s))
      << cluster.GetJson("/api/v1/jobs/" + std::to_string(a)).dump() << "\n"
      << cluster.controller()->Log();
  ASSERT_TRUE(WaitFor([&] { return NewestStep(cluster, a) >= 3; }, 120s));

  const api::Json second =
      cluster.PostJson("/api/v1/jobs", Training("bob-colorize", images), &status, bob);
  ASSERT_EQ(status, 201) << second.dump();
  const api::JobId b = second.value("id", api::JobId{0});
  EXPECT_TRUE(WaitFor([&] { return cluster.JobState(b) == "running"; }, 120s))
      << cluster.GetJson("/api/v1/jobs/" + std::to_string(b)).dump() << "\n"
      << cluster.controller()->Log();
  std::string events;
  for (const auto& e : cluster.Events(a)) {
    events += e.to_state + " (" + e.reason + ")\n";
    EXPECT_NE(e.to_state, "recovering") << e.reason;
  }
  EXPECT_NE(events.find("shrinks to "), std::string::npos) << events;
  EXPECT_NE(events.find("job " + std::to_string(b) + " of bob takes its devices"),
            std::string::npos)
      << events;
  EXPECT_EQ(cluster.PlannedNodes(a).size(), 1u);
  EXPECT_EQ(cluster.GetJson("/api/v1/jobs/" + std::to_string(a)).value("attempt", 0), 1);
  // Both train on: alice's in its first attempt, bob's from its start.
  const int64_t shrunk_at = NewestStep(cluster, a);
  EXPECT_TRUE(WaitFor([&] { return NewestStep(cluster, a) > shrunk_at + 3; }, 60s)) << events;
  EXPECT_TRUE(WaitFor([&] { return NewestStep(cluster, b) >= 3; }, 120s));
  for (api::JobId id : {a, b}) {
    cluster.PostJson("/api/v1/jobs/" + std::to_string(id) + "/cancel", api::Json::object());
  }
}

}  // namespace
}  // namespace tessera::testing
