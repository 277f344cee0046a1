// ControlPlaneService: agents' heartbeats (nodes, devices, progress, the
// metrics history, logs, and what a beat writes), against a real SqliteStore.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "daemon/control_plane_service.h"
#include "daemon/store/faulty_store.h"
#include "tests/daemon/control_plane_service_fixture.h"

namespace tessera::daemon {
namespace {

TEST_F(ControlPlaneServiceTest, HeartbeatRegistersNodeDevicesAndProgress) {
  const api::Job job = Submit(kAlice);
  std::vector<api::WorkerStatus> workers = {
      Worker(job.id, 1, {{"step", 5}, {"rank", 1}}), Worker(job.id, 0, {{"step", 6}, {"rank", 0}}),
      Worker(4242, 0, {{"step", 1}}),  // a job the controller does not know
  };
  auto answer = service_->Heartbeat(HeartbeatJson("boxC", workers));
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  auto resp = api::HeartbeatResponseFromJson(*answer);
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_TRUE(resp->desired.empty());
  EXPECT_EQ(resp->heartbeat_interval_ms, 1000);

  auto nodes = service_->ListNodes(kAlice);
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 1u);
  const api::Node& n = (*nodes)[0];
  EXPECT_EQ(n.name, "boxC");
  EXPECT_EQ(n.address, "10.0.0.7");
  EXPECT_EQ(n.health, "healthy");
  EXPECT_EQ(n.last_heartbeat_ms, clock_.NowUnixMillis());
  ASSERT_EQ(n.devices.size(), 1u);
  EXPECT_TRUE(n.devices[0].emulated);
  EXPECT_EQ(n.devices[0].uuid, "GPU-1");
  EXPECT_DOUBLE_EQ(n.devices[0].relative_speed, 0.25);
  EXPECT_EQ(service_->GetJob(kAlice, job.id)->progress, (api::Json{{"step", 6}, {"rank", 0}}))
      << "rank 0's progress is the job's";
}

TEST_F(ControlPlaneServiceTest, HeartbeatsBuildEachJobsMetricsHistoryAcrossAttempts) {
  const api::Job job = Submit(kAlice);
  const int64_t received = clock_.NowUnixMillis();
  // Rank 0 writes every figure with its own time; rank 1 a bare line.
  api::Json full = {{"step", 3},
                    {"loss", 0.75},
                    {"samples_per_s", 96.0},
                    {"compute_s", 0.2},
                    {"comm_s", 0.05},
                    {"bubble_s", 0.01},
                    {"peak_memory_bytes", 1 << 20},
                    {"predicted_peak_memory_bytes", 2 << 20},
                    {"ts_ms", 1234},
                    {"rank", 0},
                    {"d_loss", 0.1}};
  ASSERT_TRUE(service_
                  ->Heartbeat(HeartbeatJson(
                      "boxH", {Worker(job.id, 0, full), Worker(job.id, 1, {{"step", 3}}),
                               Worker(job.id, 2, {{"note", "no step"}})}))
                  .ok());
  // The next beat repeats rank 0's line (it did not move on) and a new
  // attempt's rank 1 starts over at step 2.
  clock_.Advance(std::chrono::milliseconds(1000));
  api::WorkerStatus resumed = Worker(job.id, 1, {{"step", 2}, {"loss", 0.9}});
  resumed.key.attempt = 2;
  ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxH", {Worker(job.id, 0, full), resumed})).ok());

  api::MetricsQuery q;
  q.job_id = job.id;
  auto page = service_->JobMetrics(kAlice, q);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->points.size(), 3u);
  const api::MetricPoint& r1a2 = page->points[0];
  EXPECT_EQ((std::tuple{r1a2.step, r1a2.attempt, r1a2.rank}), (std::tuple{2, 2, 1}));
  EXPECT_EQ(r1a2.ts_ms, received + 1000) << "no ts_ms: when tesserad received it";
  const api::MetricPoint& r0 = page->points[1];
  EXPECT_EQ((std::tuple{r0.step, r0.attempt, r0.rank}), (std::tuple{3, 1, 0}));
  EXPECT_EQ(r0.ts_ms, 1234);
  EXPECT_EQ(r0.loss, 0.75);
  EXPECT_EQ(r0.comm_s, 0.05);
  EXPECT_EQ(r0.peak_memory_bytes, 1 << 20);
  EXPECT_EQ(r0.predicted_peak_memory_bytes, 2 << 20);
  EXPECT_EQ(page->points[2].rank, 1);
  EXPECT_FALSE(page->points[2].loss.has_value());
  EXPECT_EQ(service_->GetJob(kAlice, job.id)->progress, resumed.progress)
      << "the newest attempt's line, not the lowest rank's";
}

// After a planned shrink the left-out rank is still reported with the line of
// the world it left (generation 0), by its own node's beat too; a restarted
// attempt starts over at a lower step. The job's progress is the newest line
// whichever node beats last.
TEST_F(ControlPlaneServiceTest, AJobsProgressIsItsNewestLineAcrossNodesWorldsAndAttempts) {
  const api::Job job = Submit(kAlice);
  auto line = [](int64_t step, int64_t generation, double rate) {
    return api::Json{{"step", step}, {"generation", generation}, {"samples_per_s", rate}};
  };
  auto beat = [&](const char* node, std::vector<api::WorkerStatus> workers) {
    ASSERT_TRUE(service_->Heartbeat(HeartbeatJson(node, std::move(workers))).ok());
    clock_.Advance(std::chrono::milliseconds(500));
  };
  auto progress = [&] { return service_->GetJob(kAlice, job.id)->progress; };
  // Rank 0 (boxA) is left out; ranks 1 (boxA) and 2 (boxB) re-formed as generation 1.
  api::WorkerStatus left_out = Worker(job.id, 0, line(40, 0, 46.1));
  left_out.state = api::WorkerState::kExited;
  beat("boxA", {left_out, Worker(job.id, 1, line(41, 1, 22.1))});
  EXPECT_EQ(progress(), line(41, 1, 22.1)) << "the kept rank's, not the lowest rank's";
  beat("boxB", {Worker(job.id, 2, line(42, 1, 22.0))});
  EXPECT_EQ(progress(), line(42, 1, 22.0));
  beat("boxA", {left_out});
  EXPECT_EQ(progress(), line(42, 1, 22.0)) << "a later beat's older line replaced the newest";
  // A restart: attempt 2 resumes from its checkpoint at step 30.
  api::WorkerStatus resumed = Worker(job.id, 0, line(30, 0, 45.0));
  resumed.key.attempt = 2;
  beat("boxB", {resumed});
  EXPECT_EQ(progress(), line(30, 0, 45.0)) << "a new attempt's line is newer at a lower step";
  beat("boxA", {left_out, Worker(job.id, 1, line(43, 1, 22.1))});
  EXPECT_EQ(progress(), line(30, 0, 45.0)) << "the ended attempt's lines replaced it";
  // Every line still reaches the history.
  api::MetricsQuery q;
  q.job_id = job.id;
  auto page = service_->JobMetrics(kAlice, q);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_TRUE(std::any_of(page->points.begin(), page->points.end(),
                          [](const api::MetricPoint& p) { return p.step == 43; }));
}

TEST_F(ControlPlaneServiceTest, EveryProgressLineABeatBringsIsAPoint) {
  const api::Job job = Submit(kAlice);
  api::WorkerStatus w = Worker(job.id, 0, {{"step", 4}, {"loss", 0.4}});
  w.progress_lines = {{{"step", 2}, {"loss", 0.6}},
                      {{"step", 3}, {"loss", 0.5}},
                      {{"step", 4}, {"loss", 0.4}},
                      {{"note", "no step"}}};
  ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxP", {w})).ok());
  api::MetricsQuery q;
  q.job_id = job.id;
  auto page = service_->JobMetrics(kAlice, q);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  std::vector<std::pair<int64_t, double>> got;
  for (const api::MetricPoint& p : page->points) got.emplace_back(p.step, *p.loss);
  EXPECT_EQ(got, (std::vector<std::pair<int64_t, double>>{{2, 0.6}, {3, 0.5}, {4, 0.4}}));
}

TEST_F(ControlPlaneServiceTest, JobMetricsFollowJobVisibilityAndNameBadFields) {
  const api::Job job = Submit(kAlice);
  api::MetricsQuery q;
  q.job_id = job.id;
  EXPECT_TRUE(service_->JobMetrics(kAlice, q).ok());
  EXPECT_TRUE(service_->JobMetrics(kRoot, q).ok());
  EXPECT_EQ(service_->JobMetrics(kBob, q).status().code(), StatusCode::kPermissionDenied);
  api::MetricsQuery missing = q;
  missing.job_id = 999;
  EXPECT_EQ(service_->JobMetrics(kAlice, missing).status().code(), StatusCode::kNotFound);
  struct Case {
    std::function<void(api::MetricsQuery&)> change;
    const char* field;
  } cases[] = {
      {[](api::MetricsQuery& m) { m.limit = 0; }, "limit"},
      {[](api::MetricsQuery& m) { m.limit = api::kMaxMetricsPageSize + 1; }, "limit"},
      {[](api::MetricsQuery& m) { m.since = -1; }, "since"},
      {[](api::MetricsQuery& m) { m.rank = -2; }, "rank"},
      {[](api::MetricsQuery& m) { m.attempt = -1; }, "attempt"},
  };
  for (const Case& c : cases) {
    api::MetricsQuery bad = q;
    c.change(bad);
    Status st = service_->JobMetrics(kAlice, bad).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_EQ(st.field(), c.field);
  }
}

TEST_F(ControlPlaneServiceTest, HeartbeatKeepsTheNodesDeclaredNetworkLink) {
  api::Json beat = HeartbeatJson("boxN");
  beat["network_bandwidth_bytes_per_s"] = 2.5e6;
  beat["network_latency_s"] = 0.005;
  ASSERT_TRUE(service_->Heartbeat(beat).ok());
  auto nodes = service_->ListNodes(kAlice);
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_DOUBLE_EQ((*nodes)[0].network.bandwidth_bytes_per_s, 2.5e6);
  EXPECT_DOUBLE_EQ((*nodes)[0].network.latency_s, 0.005);
  // A beat without it (an agent restarted without `network:`) forgets it.
  ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxN")).ok());
  EXPECT_EQ(service_->ListNodes(kAlice)->at(0).network.bandwidth_bytes_per_s, 0);
}

TEST_F(ControlPlaneServiceTest, JobLogsServeTheNewestAttemptsReportedTail) {
  const api::Job job = Submit(kAlice);
  api::WorkerStatus old = Worker(job.id, 0, nullptr);
  old.log_tail = {"old attempt"};
  api::WorkerStatus w = Worker(job.id, 0, nullptr);
  w.key.attempt = 2;
  w.log_tail = {"line 1", "line 2", "line 3"};
  ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxL", {w})).ok());
  ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxM", {old})).ok());  // stale report

  auto logs = service_->JobLogs(kAlice, job.id, 0, 2);
  ASSERT_TRUE(logs.ok()) << logs.status().ToString();
  EXPECT_EQ(*logs, (std::vector<std::string>{"line 2", "line 3"}));
  EXPECT_EQ(service_->JobLogs(kBob, job.id, 0, 2).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(service_->JobLogs(kAlice, job.id, 1, 2).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(service_->JobLogs(kAlice, job.id, 0, 0).status().field(), "tail");
  EXPECT_EQ(service_->JobLogs(kAlice, job.id, -1, 5).status().field(), "rank");
}

TEST_F(ControlPlaneServiceTest, JobLogsAreBoundedPerRankAndKeptForAWhileAfterTheJobEnds) {
  const api::Job job = Submit(kAlice);
  api::WorkerStatus w = Worker(job.id, 0, nullptr);
  for (int i = 0; i < 300; ++i) w.log_tail.push_back("line " + std::to_string(i));
  w.log_tail.back() = std::string(100'000, 'x');
  ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxL", {w})).ok());
  auto logs = service_->JobLogs(kAlice, job.id, 0, 100);
  ASSERT_TRUE(logs.ok()) << logs.status().ToString();
  ASSERT_EQ(logs->size(), 100u);
  EXPECT_EQ(logs->front(), "line 200");
  EXPECT_EQ(logs->back().size(), 4096u) << "a huge line is cut";

  // The job ends: its page still shows the logs for a while (a sweep sees it
  // ended), and a sweep after the retention drops them.
  ASSERT_TRUE(service_->CancelJob(kAlice, job.id).ok());
  clock_.Advance(std::chrono::seconds(10));
  ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxL")).ok());
  EXPECT_TRUE(service_->JobLogs(kAlice, job.id, 0, 5).ok());
  clock_.Advance(std::chrono::minutes(14));
  ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxL")).ok());
  EXPECT_TRUE(service_->JobLogs(kAlice, job.id, 0, 5).ok()) << "ended 14 min ago: kept";
  clock_.Advance(std::chrono::minutes(2));
  ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxL")).ok());
  EXPECT_EQ(service_->JobLogs(kAlice, job.id, 0, 5).status().code(), StatusCode::kNotFound);
}

TEST_F(ControlPlaneServiceTest, OnlyTheLatestEndedJobsKeepTheirLogs) {
  constexpr int kJobs = 40;  // more than the service keeps
  std::vector<api::JobId> ids;
  for (int i = 0; i < kJobs; ++i) {
    const api::Job job = Submit(kAlice);
    api::WorkerStatus w = Worker(job.id, 0, nullptr);
    w.log_tail = {"job " + std::to_string(i)};
    ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxL", {w})).ok());
    ASSERT_TRUE(service_->CancelJob(kAlice, job.id).ok());
    clock_.Advance(std::chrono::seconds(6));  // one sweep per job: each ends at its own time
    ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxL")).ok());
    ids.push_back(job.id);
  }
  constexpr int kKept = 32;  // the service's bound on ended jobs with logs
  for (int i = 0; i < kJobs; ++i) {
    EXPECT_EQ(service_->JobLogs(kAlice, ids[i], 0, 5).ok(), i >= kJobs - kKept)
        << "job " << i << " of " << kJobs << " (the latest " << kKept << " keep theirs)";
  }
}

TEST_F(ControlPlaneServiceTest, ABeatWithAnUnchangedInventoryKeepsTheStoredDevices) {
  api::Json full = HeartbeatJson("boxU");
  ASSERT_FALSE(full["devices"].empty());
  auto first = service_->Heartbeat(full);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ((*first)["accepts_unchanged_inventory"], true);
  api::Json light = full;
  light["devices"] = api::Json::array();
  light["links"] = api::Json::array();
  light["inventory_unchanged"] = true;
  auto second = service_->Heartbeat(light);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->contains("send_inventory"));
  EXPECT_EQ(service_->ListNodes(kAlice)->at(0).devices.size(), full["devices"].size());
  // A node the controller does not know is asked for its inventory.
  light["node"] = "boxNew";
  auto unknown = service_->Heartbeat(light);
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ((*unknown)["send_inventory"], true);
}

// A beat writes the node's row only when it changes something durable;
// between writes the node's newest beat time lives in memory (ListNodes).
TEST_F(ControlPlaneServiceTest, AHeartbeatThatChangesNothingWritesNothing) {
  using std::chrono::milliseconds;
  struct Case {
    std::string name;
    std::function<void(api::Json*)> change;  // the second beat, from the first
    milliseconds later;                      // between the beats
    bool writes;
  };
  const std::vector<Case> cases = {
      {"the same beat", [](api::Json*) {}, milliseconds(1000), false},
      {"inventory_unchanged",
       [](api::Json* b) {
         (*b)["devices"] = api::Json::array();
         (*b)["inventory_unchanged"] = true;
       },
       milliseconds(1000), false},
      {"workers without progress",
       [](api::Json* b) {
         (*b)["workers"] = api::Json::array({api::ToJson(Worker(7, 0, nullptr))});
       },
       milliseconds(1000), false},
      {"a new address", [](api::Json* b) { (*b)["address"] = "10.0.0.8"; }, milliseconds(1000),
       true},
      {"a device changed", [](api::Json* b) { (*b)["devices"][0]["memory_bytes"] = 8'000'000'000; },
       milliseconds(1000), true},
      {"a network link declared", [](api::Json* b) { (*b)["network_bandwidth_bytes_per_s"] = 1e9; },
       milliseconds(1000), true},
      {"the stored time too old", [](api::Json*) {}, milliseconds(30'000), true},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    FaultyStore counting(store_.get());  // counts the writes
    ControlPlaneService service(&counting, &clock_);
    const std::string node = "box" + std::to_string(i);
    const api::Json first = HeartbeatJson(node);
    ASSERT_TRUE(service.Heartbeat(first).ok()) << c.name;
    const int64_t first_ms = clock_.NowUnixMillis();
    const int64_t writes = counting.writes_seen();
    clock_.Advance(c.later);
    api::Json second = first;
    c.change(&second);
    auto answer = service.Heartbeat(second);
    ASSERT_TRUE(answer.ok()) << c.name << ": " << answer.status().ToString();
    EXPECT_EQ(counting.writes_seen() - writes, c.writes ? 1 : 0) << c.name;
    auto stored = store_->GetNode(node);
    ASSERT_TRUE(stored.ok()) << c.name;
    EXPECT_EQ(stored->last_heartbeat_ms, c.writes ? clock_.NowUnixMillis() : first_ms) << c.name;
    EXPECT_EQ(stored->devices.size(), 1u) << c.name;
    // Whether written or not, the node shows the newest beat's time.
    auto listed = service.ListNodes(kRoot);
    ASSERT_TRUE(listed.ok()) << c.name;
    auto it = std::find_if(listed->begin(), listed->end(),
                           [&](const api::Node& n) { return n.name == node; });
    ASSERT_NE(it, listed->end()) << c.name;
    EXPECT_EQ(it->last_heartbeat_ms, clock_.NowUnixMillis()) << c.name;
  }
}

TEST_F(ControlPlaneServiceTest, NodeRowsAreWrittenAgainAfterARestartOrAFailedWrite) {
  FaultyStore counting(store_.get());
  api::Json full = HeartbeatJson("boxR");
  api::Json light = full;
  light["devices"] = api::Json::array();
  light["inventory_unchanged"] = true;
  {
    ControlPlaneService service(&counting, &clock_);
    ASSERT_TRUE(service.Heartbeat(full).ok());
  }
  // A restarted service has no memory of the row: the node's first beat
  // rewrites it (its time), with the stored inventory.
  clock_.Advance(std::chrono::seconds(5));
  ControlPlaneService restarted(&counting, &clock_);
  int64_t writes = counting.writes_seen();
  ASSERT_TRUE(restarted.Heartbeat(light).ok());
  EXPECT_EQ(counting.writes_seen() - writes, 1);
  EXPECT_EQ(store_->GetNode("boxR")->last_heartbeat_ms, clock_.NowUnixMillis());
  EXPECT_EQ(store_->GetNode("boxR")->devices.size(), 1u);
  writes = counting.writes_seen();
  ASSERT_TRUE(restarted.Heartbeat(light).ok());
  EXPECT_EQ(counting.writes_seen() - writes, 0);

  // A failed write is not taken as written: the next beat writes again.
  counting.ArmWriteFault(1, Unavailable("disk busy"));
  ASSERT_EQ(restarted.Heartbeat(HeartbeatJson("boxR")).ok(), true) << "nothing to write yet";
  full["address"] = "10.0.0.9";
  EXPECT_EQ(restarted.Heartbeat(full).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store_->GetNode("boxR")->address, "10.0.0.7");
  writes = counting.writes_seen();
  ASSERT_TRUE(restarted.Heartbeat(full).ok());
  EXPECT_EQ(counting.writes_seen() - writes, 1);
  EXPECT_EQ(store_->GetNode("boxR")->address, "10.0.0.9");
}

TEST_F(ControlPlaneServiceTest, HeartbeatRefusesMalformedInput) {
  EXPECT_EQ(service_->Heartbeat(api::Json{{"node", 5}}).status().code(),
            StatusCode::kInvalidArgument);
  auto unnamed = service_->Heartbeat(api::Json::object());
  EXPECT_EQ(unnamed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(service_->ListNodes(kRoot)->empty());
}

}  // namespace
}  // namespace tessera::daemon
