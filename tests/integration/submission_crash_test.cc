// Crash test: a real tesserad receives concurrent submissions over HTTP, is
// kill -9'd in the middle of the stream, and restarted on the same state
// folder. Every submission that got a 201 must be present and intact; no
// half-written job may appear.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "tests/integration/harness.h"

namespace tessera::testing {
namespace {
using namespace std::chrono_literals;

api::Json SpecFor(int client, int i) {
  return {{"name", "crash-" + std::to_string(client) + "-" + std::to_string(i)},
          {"entrypoint", "builtin:colorize-unet"},
          {"dataset", "/srv/archive/scans"},
          {"global_batch", 8 + i % 7},
          {"steps", 100 + client},
          {"priority", i % 5},
          {"env", {{"SEQ", std::to_string(i)}}}};
}

TEST(SubmissionCrashTest, AcknowledgedSubmissionsSurviveKill9) {
  Cluster cluster("crash");
  cluster.StartController();

  constexpr int kClients = 8;
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::map<api::JobId, api::Json> acked;  // id -> spec we sent
  std::atomic<int> transport_errors{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto client = cluster.Client();
      for (int i = 0; !stop; ++i) {
        api::Json spec = SpecFor(c, i);
        auto r = client->Request("POST", "/api/v1/jobs", spec.dump());
        if (!r.ok()) {
          ++transport_errors;
          return;  // the daemon is gone
        }
        if (r->status != 201) continue;
        api::Json job = api::Json::parse(r->body);
        std::lock_guard lock(mu);
        acked[job["id"].get<api::JobId>()] = spec;
      }
    });
  }
  // Let a good number of submissions through, then pull the plug mid-stream.
  ASSERT_TRUE(WaitFor(
      [&] {
        std::lock_guard lock(mu);
        return acked.size() >= 300;
      },
      60s));
  cluster.StopController(SIGKILL);
  stop = true;
  for (auto& t : clients) t.join();
  ASSERT_GT(transport_errors.load(), 0) << "the kill did not interrupt the stream";

  cluster.StartController();
  // Every acknowledged job is there with exactly what was sent.
  std::map<api::JobId, api::Json> found;
  api::JobId after = 0;
  while (true) {
    api::Json page = cluster.GetJson("/api/v1/jobs?limit=500&after=" + std::to_string(after));
    ASSERT_TRUE(page.is_object());
    for (const auto& j : page["jobs"]) found[j["id"].get<api::JobId>()] = j;
    if (page["next_after"].is_null()) break;
    after = page["next_after"].get<api::JobId>();
  }
  EXPECT_GE(found.size(), acked.size());
  for (const auto& [id, sent] : acked) {
    ASSERT_TRUE(found.contains(id)) << "acknowledged job " << id << " lost";
    const api::Json& spec = found[id]["spec"];
    EXPECT_EQ(spec["name"], sent["name"]);
    EXPECT_EQ(spec["global_batch"], sent["global_batch"]);
    EXPECT_EQ(spec["steps"], sent["steps"]);
    EXPECT_EQ(spec["env"], sent["env"]);
  }
  // No half-written job: every job found has a complete spec and its
  // submission event.
  for (const auto& [id, job] : found) {
    EXPECT_TRUE(job["spec"].is_object()) << id;
    EXPECT_FALSE(job["spec"]["name"].get<std::string>().empty()) << id;
    auto events = cluster.Events(id);
    ASSERT_FALSE(events.empty()) << "job " << id << " has no submission event";
    EXPECT_EQ(events.front().to_state, "pending");
  }
}

}  // namespace
}  // namespace tessera::testing
