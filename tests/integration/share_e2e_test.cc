// Sharing the lab on a real cluster (tesserad, two agents, the real worker):
// alice's training job takes both devices; when bob's arrives, the share
// policy shrinks alice's job in place (scheduler/share_policy.h,
// daemon/controller/job_controller_share.cc) and bob's starts on the device
// it gave up, while alice's trains on in the same attempt; an infer job of
// another user gets its share the same way; a job moves, goes back to the
// queue, or swaps its slow device for a faster one, and resumes from its
// checkpoint.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <string>

#include "tests/common/temp_dir.h"
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

// Alice's job in the tests that restart it from its checkpoint: one saved
// every 2 s, and a single attempt (one that ends in a move or back in the
// queue does not count).
api::Json RestartedTraining(const fs::path& images) {
  api::Json job = Training("alice-colorize", images);
  job["checkpoint_every_s"] = 2;
  job["max_attempts"] = 1;
  return job;
}

int64_t NewestStep(Cluster& cluster, api::JobId id) {
  int64_t newest = 0;
  const api::Json points =
      cluster.GetJson("/api/v1/jobs/" + std::to_string(id) + "/metrics?attempt=1&limit=5000")
          .value("points", api::Json::array());
  for (const api::Json& p : points) newest = std::max(newest, p.value("step", int64_t{0}));
  return newest;
}

// Checks that job `a` stopped once with an event holding `stopped_with`
// (never recovering or failing), and that its second attempt resumed from the
// checkpoint its first saved as it stopped (its first step is past the
// first attempt's last); returns a's events, a line each.
std::string ExpectResumedFromItsCheckpoint(Cluster& cluster, api::JobId a,
                                           const std::string& stopped_with) {
  std::string events;
  for (const auto& e : cluster.Events(a)) {
    events += e.to_state + " (" + e.reason + ")\n";
    EXPECT_NE(e.to_state, "recovering") << e.reason;
    EXPECT_NE(e.to_state, "failed") << e.reason;
  }
  EXPECT_NE(events.find(stopped_with), std::string::npos) << events;
  const api::Json job = cluster.GetJson("/api/v1/jobs/" + std::to_string(a));
  EXPECT_EQ(job.value("attempt", 0), 2) << job.dump();
  const int64_t stopped_at = NewestStep(cluster, a);  // of attempt 1
  int64_t first_step = 0;
  EXPECT_TRUE(WaitFor(
      [&] {
        const api::Json points =
            cluster.GetJson("/api/v1/jobs/" + std::to_string(a) + "/metrics?attempt=2&limit=5000")
                .value("points", api::Json::array());
        if (points.empty()) return false;
        first_step = points.front().value("step", int64_t{0});
        return true;
      },
      120s))
      << events;
  EXPECT_GE(first_step, stopped_at) << "attempt 2 started over instead of resuming\n" << events;
  return events;
}

// Generated images of `px` pixels under `images`, readable by users (its
// parent is a data root), and nodea and nodeb with the inventories given;
// `extra_config` is added to tesserad's.
void StartLab(Cluster& cluster, const fs::path& images, const std::string& nodea,
              const std::string& nodeb, int px = 32, const std::string& extra_config = "") {
  ASSERT_EQ(GenImages(images, 32, px), "");
  ASSERT_TRUE(cluster.StartWorkerLab({{"nodea", nodea}, {"nodeb", nodeb}},
                                     "data_roots:\n  - {path: \"" + images.parent_path().string() +
                                         "\", access: read}\n" + extra_config,
                                     30s));
}

// Checks that job `a` shrank for bob's job `b` in place (its first attempt,
// never recovering); returns a's events, a line each.
std::string ExpectShrunkInPlaceFor(Cluster& cluster, api::JobId a, api::JobId b) {
  std::string events;
  for (const auto& e : cluster.Events(a)) {
    events += e.to_state + " (" + e.reason + ")\n";
    EXPECT_NE(e.to_state, "recovering") << e.reason;
  }
  EXPECT_NE(events.find("shrinks to "), std::string::npos) << events;
  EXPECT_NE(events.find("job " + std::to_string(b) + " of bob takes its devices"),
            std::string::npos)
      << events;
  EXPECT_EQ(cluster.GetJson("/api/v1/jobs/" + std::to_string(a)).value("attempt", 0), 1) << events;
  return events;
}

TEST(ShareE2ETest, ARunningJobShrinksForAnotherUsersJobAndBothTrainOn) {
  Cluster cluster("real-share");
  const fs::path images = cluster.dir() / "data" / "shared" / "images";
  // Work enough per sample (12 samples of 64 px a step) that two devices
  // plainly beat one even with a profile measured on a loaded host, whose
  // per-call part comes out inflated (one CI run planned 6 samples of 32 px on
  // one device, two predicted 1.07x slower); and growth by any predicted gain.
  ASSERT_NO_FATAL_FAILURE(
      StartLab(cluster, images, kOneDevice, kOneDevice, 64, "grow_min_speedup: 1.0\n"));
  const std::string alice = cluster.UserToken("alice");
  const std::string bob = cluster.UserToken("bob");
  auto training = [&](const std::string& name) {
    api::Json spec = Training(name, images);
    spec["global_batch"] = 12;
    spec["args"] = {"--image-size", "64", "--width", "8"};
    return spec;
  };

  api::JobId a = 0;
  ASSERT_TRUE(cluster.SubmitJob(training("alice-colorize"), &a, alice));
  // Pending while tesserad profiles the model, then running on both nodes.
  ASSERT_TRUE(WaitFor([&] { return cluster.PlannedNodes(a).size() == 2; }, 300s))
      << cluster.GetJson("/api/v1/jobs/" + std::to_string(a)).dump() << "\n"
      << cluster.controller()->Log();
  ASSERT_TRUE(WaitFor([&] { return NewestStep(cluster, a) >= 3; }, 120s));

  api::JobId b = 0;
  ASSERT_TRUE(cluster.SubmitJob(training("bob-colorize"), &b, bob));
  EXPECT_TRUE(WaitFor([&] { return cluster.JobState(b) == "running"; }, 120s))
      << cluster.GetJson("/api/v1/jobs/" + std::to_string(b)).dump() << "\n"
      << cluster.controller()->Log();
  const std::string events = ExpectShrunkInPlaceFor(cluster, a, b);
  EXPECT_EQ(cluster.PlannedNodes(a).size(), 1u);
  // The rank the shrink left out was told so and left by itself (exit code
  // 0), not stopped by its agent's signal.
  std::string left_out;
  for (const std::string node : {"nodea", "nodeb"}) {
    for (const fs::path& log : RankFiles(cluster, node, a, "worker.log")) {
      const std::string text = Slurp(log);
      if (text.find("left out of the re-formed attempt") == std::string::npos) continue;
      left_out = Slurp(log.parent_path() / "exit.json");
    }
  }
  EXPECT_NE(left_out.find("\"exit_code\":0"), std::string::npos) << "exit.json: " << left_out;
  // Both train on: alice's in its first attempt, bob's from its start.
  const int64_t shrunk_at = NewestStep(cluster, a);
  EXPECT_TRUE(WaitFor([&] { return NewestStep(cluster, a) > shrunk_at + 3; }, 60s)) << events;
  EXPECT_TRUE(WaitFor([&] { return NewestStep(cluster, b) >= 3; }, 120s));
  for (api::JobId id : {a, b}) {
    cluster.PostJson("/api/v1/jobs/" + std::to_string(id) + "/cancel", api::Json::object());
  }
}

// Another user's infer job gets its share too: alice's training job holds
// both devices when bob submits an archive inference; the share policy
// shrinks her job in place and his runs on the device it gave up, to the last
// image, then her job grows back onto it, all in her first attempt.
TEST(ShareE2ETest, AnotherUsersInferJobTakesItsShareAndTrainingGrowsBackAfterIt) {
  Cluster cluster("real-share-infer");
  const fs::path images = cluster.dir() / "data" / "shared" / "images";
  const fs::path bobs = cluster.dir() / "data" / "bob";
  // A folder of each user's own beside the shared images (the config's
  // data_roots list goes on), and growth by any predicted gain.
  ASSERT_NO_FATAL_FAILURE(StartLab(cluster, images, kOneDevice, kOneDevice, 64,
                                   "  - {path: \"" + (cluster.dir() / "data").string() +
                                       "/{user}\", access: write}\n"
                                       "grow_min_speedup: 1.0\ninfer_chunk_images: 4\n"));
  // Bob's model: two steps of training of his own, outside the cluster.
  ASSERT_EQ(RunTool({BinaryPath("tessera-worker"), "train", "--model", "colorize-unet", "--data",
                     images.string(), "--steps", "2", "--width", "8", "--image-size", "64",
                     "--batch", "4", "--checkpoint-every-steps", "1"},
                    {{"TESSERA_CHECKPOINT_DIR", (bobs / "model").string()}},
                    cluster.dir() / "bob-train.log", 300s),
            "");
  const std::string alice = cluster.UserToken("alice");
  const std::string bob = cluster.UserToken("bob");

  api::Json training = Training("alice-colorize", images);
  training["global_batch"] = 12;
  training["args"] = {"--image-size", "64", "--width", "8"};
  api::JobId a = 0;
  ASSERT_TRUE(cluster.SubmitJob(training, &a, alice));
  ASSERT_TRUE(WaitFor([&] { return cluster.PlannedNodes(a).size() == 2; }, 300s))
      << cluster.GetJson("/api/v1/jobs/" + std::to_string(a)).dump() << "\n"
      << cluster.controller()->Log();
  ASSERT_TRUE(WaitFor([&] { return NewestStep(cluster, a) >= 3; }, 120s));

  api::Json inference = InferJobSpec("bob-archive", "builtin:colorize-unet", images,
                                     bobs / "colorized", {"--threads", "1"});
  inference.update({{"checkpoint", (bobs / "model").string()}, {"global_batch", 4}});
  api::JobId b = 0;
  ASSERT_TRUE(cluster.SubmitJob(inference, &b, bob));
  const std::string bob_path = "/api/v1/jobs/" + std::to_string(b);
  EXPECT_TRUE(WaitFor([&] { return cluster.JobState(b) == "succeeded"; }, 180s))
      << cluster.GetJson(bob_path).dump() << "\n"
      << cluster.controller()->Log();
  EXPECT_EQ(cluster.GetJson(bob_path)["inference"].value("images_done", 0), 32);
  EXPECT_EQ(cluster.GetJson(bob_path).value("attempt", 0), 1);
  EXPECT_EQ(FilesBelow(bobs / "colorized").size(), 32u);

  // Her job grows back onto the device once his is done.
  EXPECT_TRUE(WaitFor([&] { return cluster.PlannedNodes(a).size() == 2; }, 60s));
  ExpectShrunkInPlaceFor(cluster, a, b);
  EXPECT_EQ(cluster.JobState(a), "running");
  cluster.PostJson("/api/v1/jobs/" + std::to_string(a) + "/cancel", api::Json::object());
}

// A move onto none of a job's devices restarts it from its checkpoint:
// alice's job (one device at most) runs on nodea's faster device; bob's job,
// whose images are too large for nodeb's small device, can run only there.
// The share policy moves alice's job to nodeb: her rank stops (saving a
// checkpoint), the job is pending again with a `moved` event, and its second
// attempt resumes on nodeb from that checkpoint (its first step is past the
// steps the first attempt made) while bob's job runs on nodea.
TEST(ShareE2ETest, AJobMovedOntoAnotherNodeResumesFromItsCheckpoint) {
  Cluster cluster("real-move");
  const fs::path images = cluster.dir() / "data" / "shared" / "images";
  ASSERT_NO_FATAL_FAILURE(StartLab(cluster, images,
                                   InventoryYaml({{1, "Fast (emulated)", "8GiB", 0.5}}),
                                   InventoryYaml({{1, "Small (emulated)", "24MiB", 0.3}})));
  const std::string alice = cluster.UserToken("alice");
  const std::string bob = cluster.UserToken("bob");

  api::Json alices = RestartedTraining(images);
  alices["max_devices"] = 1;
  api::JobId a = 0;
  ASSERT_TRUE(cluster.SubmitJob(alices, &a, alice));
  ASSERT_TRUE(
      WaitFor([&] { return cluster.PlannedNodes(a) == std::set<std::string>{"nodea"}; }, 300s))
      << cluster.GetJson("/api/v1/jobs/" + std::to_string(a)).dump() << "\n"
      << cluster.controller()->Log();
  ASSERT_TRUE(WaitFor([&] { return NewestStep(cluster, a) >= 3; }, 120s));

  // Bob's crops are 128 px: 16 times the pixels of alice's 32 px, and more
  // memory (over 30 MB predicted) than nodeb's 24 MiB hold; alice's (some
  // 17 MB) fit there.
  api::Json bobs = Training("bob-colorize", images);
  bobs["args"] = {"--image-size", "128", "--width", "32"};
  api::JobId b = 0;
  ASSERT_TRUE(cluster.SubmitJob(bobs, &b, bob));
  EXPECT_TRUE(WaitFor([&] { return cluster.JobState(b) == "running"; }, 120s))
      << cluster.GetJson("/api/v1/jobs/" + std::to_string(b)).dump() << "\n"
      << cluster.controller()->Log();
  EXPECT_TRUE(WaitFor([&] { return cluster.JobState(a) == "running"; }, 60s));
  const std::string events = ExpectResumedFromItsCheckpoint(
      cluster, a, "pending (moves to nodeb:0: job " + std::to_string(b) + " of bob");
  EXPECT_EQ(cluster.PlannedNodes(a), std::set<std::string>{"nodeb"}) << events;
  EXPECT_EQ(cluster.PlannedNodes(b), std::set<std::string>{"nodea"})
      << cluster.GetJson("/api/v1/jobs/" + std::to_string(b)).dump();
  for (api::JobId id : {a, b}) {
    cluster.PostJson("/api/v1/jobs/" + std::to_string(id) + "/cancel", api::Json::object());
  }
}

// A long job goes back to the queue for a short one that needs both devices:
// alice's job (two devices at least) trains on nodea and nodeb; bob's, a few
// steps on two devices, would wait for hers to end. The share policy sends
// hers back to the queue: her ranks stop, each saving a checkpoint, the job
// is pending with a `moved` event, bob's runs on both devices and succeeds,
// and her second attempt then resumes from the checkpoint.
TEST(ShareE2ETest, ALongJobGoesBackToTheQueueForAShortOneAndResumesAfterIt) {
  Cluster cluster("real-requeue");
  const fs::path images = cluster.dir() / "data" / "shared" / "images";
  ASSERT_NO_FATAL_FAILURE(StartLab(cluster, images, kOneDevice, kOneDevice));
  const std::string alice = cluster.UserToken("alice");
  const std::string bob = cluster.UserToken("bob");

  api::Json alices = RestartedTraining(images);
  alices["min_devices"] = 2;
  api::JobId a = 0;
  ASSERT_TRUE(cluster.SubmitJob(alices, &a, alice));
  ASSERT_TRUE(WaitFor([&] { return NewestStep(cluster, a) >= 3; }, 300s))
      << cluster.GetJson("/api/v1/jobs/" + std::to_string(a)).dump() << "\n"
      << cluster.controller()->Log();

  api::Json bobs = Training("bob-colorize", images);
  bobs["min_devices"] = 2;
  bobs["steps"] = 30;
  api::JobId b = 0;
  ASSERT_TRUE(cluster.SubmitJob(bobs, &b, bob));
  EXPECT_TRUE(WaitFor([&] { return cluster.JobState(b) == "succeeded"; }, 180s))
      << cluster.GetJson("/api/v1/jobs/" + std::to_string(b)).dump() << "\n"
      << cluster.controller()->Log();
  EXPECT_EQ(cluster.PlannedNodes(b), (std::set<std::string>{"nodea", "nodeb"}));
  EXPECT_TRUE(WaitFor([&] { return cluster.JobState(a) == "running"; }, 120s));
  ExpectResumedFromItsCheckpoint(
      cluster, a,
      "pending (goes back to the queue: job " + std::to_string(b) + " of bob needs 2 devices");
  cluster.PostJson("/api/v1/jobs/" + std::to_string(a) + "/cancel", api::Json::object());
}

// The slow devices go round on a real cluster: nodea fast, nodeb in the
// middle (what a one-device fair share stands for), nodec three times slower
// than nodeb. Bob's job (90 s of predicted work on nodea) runs
// there, carol's on nodeb, alice's on nodec, and carol's second waits (of a
// lower priority: no job goes back to the queue for it). Where it is alice's
// would finish several times its time alone on her share; once bob's has
// done enough on nodea to stay within 2x on nodec, they swap: both stop with
// a checkpoint and resume on the other's node (the policy's catch-up).
TEST(ShareE2ETest, AJobOnTheSlowNodeSwapsWithAJobAheadOfItsShare) {
  Cluster cluster("real-catch-up");
  const fs::path images = cluster.dir() / "data" / "shared" / "images";
  ASSERT_EQ(GenImages(images, 32, 32), "");
  ASSERT_TRUE(cluster.StartWorkerLab(
      {{"nodea", InventoryYaml({{1, "Fast (emulated)", "8GiB", 0.6}})},
       {"nodeb", InventoryYaml({{1, "Middle (emulated)", "8GiB", 0.3}})},
       {"nodec", InventoryYaml({{1, "Slow (emulated)", "8GiB", 0.1}})}},
      "data_roots:\n  - {path: \"" + images.parent_path().string() + "\", access: read}\n", 30s));
  const std::string alice = cluster.UserToken("alice");
  const std::string bob = cluster.UserToken("bob");
  const std::string carol = cluster.UserToken("carol");
  // Each job on one device; each placed before the next is submitted.
  auto start = [&](api::Json spec, const std::string& token, const std::string& node) {
    spec["max_devices"] = 1;
    api::JobId id = 0;
    EXPECT_TRUE(cluster.SubmitJob(spec, &id, token));
    EXPECT_TRUE(WaitFor(
        [&] {
          return cluster.JobState(id) == "running" &&
                 cluster.PlannedNodes(id) == std::set<std::string>{node};
        },
        300s))
        << cluster.GetJson("/api/v1/jobs/" + std::to_string(id)).dump() << "\n"
        << cluster.controller()->Log();
    return id;
  };

  api::Json bobs = RestartedTraining(images);
  bobs["name"] = "bob-colorize";
  bobs["max_devices"] = 1;
  api::Json preview;
  int status = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        preview = cluster.PostJson("/api/v1/plans", bobs, &status, bob);
        return status == 200;
      },
      180s))
      << status;
  const double step_s = preview["plans"][0]["predicted"].value("step_s", 1.0);
  bobs["steps"] = std::max<int64_t>(30, static_cast<int64_t>(90 / step_s));
  const api::JobId b = start(bobs, bob, "nodea");
  const api::JobId c1 = start(Training("carol-colorize", images), carol, "nodeb");
  const api::JobId a = start(RestartedTraining(images), alice, "nodec");
  api::Json seconds = Training("carol-second", images);
  seconds["max_devices"] = 1;
  seconds["priority"] = -1;
  api::JobId c2 = 0;
  ASSERT_TRUE(cluster.SubmitJob(seconds, &c2, carol));

  EXPECT_TRUE(WaitFor(
      [&] {
        return cluster.PlannedNodes(a) == std::set<std::string>{"nodea"} &&
               cluster.JobState(a) == "running";
      },
      300s))
      << cluster.GetJson("/api/v1/jobs/" + std::to_string(a)).dump() << "\n"
      << cluster.controller()->Log();
  const std::string events = ExpectResumedFromItsCheckpoint(
      cluster, a, "pending (moves to nodea:0: job " + std::to_string(b) + " of bob takes");
  EXPECT_NE(events.find("where it is it would finish"), std::string::npos) << events;
  EXPECT_TRUE(
      WaitFor([&] { return cluster.PlannedNodes(b) == std::set<std::string>{"nodec"}; }, 120s))
      << cluster.GetJson("/api/v1/jobs/" + std::to_string(b)).dump();
  std::string bobs_events;
  for (const auto& e : cluster.Events(b)) bobs_events += e.to_state + " (" + e.reason + ")\n";
  EXPECT_NE(bobs_events.find("pending (moves to nodec:0: job " + std::to_string(a) + " of alice"),
            std::string::npos)
      << bobs_events;
  EXPECT_EQ(cluster.JobState(c2), "pending");
  for (api::JobId id : {a, b, c1, c2}) {
    cluster.PostJson("/api/v1/jobs/" + std::to_string(id) + "/cancel", api::Json::object());
  }
}

}  // namespace
}  // namespace tessera::testing
