// The agent loop against a fake controller (FakeAgentTransport) with a real
// ProcessSupervisor and real worker processes.
#include "agent/agent.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "agent/fake_transport.h"
#include "tests/agent/test_util.h"

namespace tessera::agent {
namespace {

using api::WorkerKey;
using api::WorkerState;
using namespace std::chrono_literals;
using testing::Eventually;
using testing::ReadFile;
using testing::ShellLaunch;
using testing::TempDir;

class StaticInventory final : public InventoryProvider {
 public:
  explicit StaticInventory(NodeInventory inv) : inv_(std::move(inv)) {}
  Result<NodeInventory> Load() override {
    ++loads;
    if (fail_next_load) return InvalidArgument("bad inventory", "devices[0].memory");
    return inv_;
  }
  void Refresh(NodeInventory* inventory) override { ++refreshes; }
  // What the next Load returns; before the agent runs its own thread.
  void Set(NodeInventory inv) { inv_ = std::move(inv); }
  // Read by the test thread while Agent::Run loads on its own thread.
  std::atomic<int> loads{0};
  std::atomic<int> refreshes{0};
  std::atomic<bool> fail_next_load{false};

 private:
  NodeInventory inv_;
};

class CountingNotifier final : public ServiceNotifier {
 public:
  void Ready() override { ++ready; }
  void Watchdog() override { ++watchdog; }
  void Stopping() override { ++stopping; }
  void SetStatus(const std::string&) override {}
  std::atomic<int> ready{0}, watchdog{0}, stopping{0};
};

NodeInventory TwoEmulatedDevices() {
  NodeInventory inv;
  for (int i = 0; i < 2; ++i) {
    api::Device d;
    d.index = i;
    d.name = "emu";
    d.type = "cuda";
    d.emulated = true;
    d.relative_speed = i == 0 ? 0.5 : 1.0;
    d.memory_bytes = 1 << 30;
    inv.devices.push_back(d);
  }
  return inv;
}

// A controller whose desired set the test sets.
class Controller {
 public:
  void Want(std::vector<api::WorkerLaunch> desired, int64_t interval_ms = 1000) {
    std::lock_guard<std::mutex> lock(mu_);
    response_.desired = std::move(desired);
    response_.heartbeat_interval_ms = interval_ms;
  }
  FakeAgentTransport::Handler Handler() {
    return [this](const api::HeartbeatRequest&) {
      std::lock_guard<std::mutex> lock(mu_);
      return api::ToJson(response_);
    };
  }

 private:
  std::mutex mu_;
  api::HeartbeatResponse response_;
};

class AgentTest : public ::testing::Test {
 protected:
  AgentTest() : inventory_(TwoEmulatedDevices()) {
    SupervisorOptions o;
    o.state_dir = state_.path();
    o.stop_grace = 500ms;
    o.poll_interval = 10ms;
    supervisor_ = std::make_unique<ProcessSupervisor>(o);
    transport_.SetHandler(controller_.Handler());
  }
  ~AgentTest() override { supervisor_->StopAllAndWait(); }
  std::unique_ptr<Agent> MakeAgent(AgentOptions o = {}) {
    if (o.node.empty()) o.node = "node-a";
    auto agent =
        std::make_unique<Agent>(o, &transport_, &inventory_, supervisor_.get(), &notifier_);
    EXPECT_TRUE(agent->Init().ok());
    return agent;
  }
  // The worker of `key` in the last heartbeat that reached the controller.
  std::optional<api::WorkerStatus> LastReported(WorkerKey key) {
    auto received = transport_.received();
    if (received.empty()) return std::nullopt;
    for (const auto& w : received.back().workers) {
      if (w.key == key) return w;
    }
    return std::nullopt;
  }
  // Beats until `done` holds for the last report.
  bool BeatUntil(Agent& agent, const std::function<bool()>& done) {
    return Eventually([&] {
      agent.Beat().IgnoreError();
      return done();
    });
  }

  TempDir state_;
  StaticInventory inventory_;
  std::unique_ptr<ProcessSupervisor> supervisor_;
  Controller controller_;
  FakeAgentTransport transport_;
  CountingNotifier notifier_;
};

TEST_F(AgentTest, RunsDesiredWorkerReportsProgressThenExitAndNeverRestartsIt) {
  WorkerKey key{1, 1, 0};
  const auto go = state_.path() / "go";
  api::WorkerLaunch launch =
      ShellLaunch(key, "echo started >> " + (state_.path() / "starts.txt").string() +
                           "; echo \"device=$TESSERA_DEVICE speed=$TESSERA_DEVICE_SPEED\";"
                           " echo '{\"step\":1,\"loss\":0.5}' >> \"$TESSERA_PROGRESS_FILE\";"
                           " while [ ! -e " +
                           go.string() + " ]; do sleep 0.02; done; exit 3");
  launch.device_indices = {0};
  controller_.Want({launch});
  auto agent = MakeAgent();

  ASSERT_TRUE(agent->Beat().ok());
  EXPECT_EQ(notifier_.ready, 1);
  ASSERT_TRUE(BeatUntil(*agent, [&] {
    auto w = LastReported(key);
    return w && w->state == WorkerState::kRunning &&
           w->progress == api::Json{{"step", 1}, {"loss", 0.5}};
  }));
  EXPECT_EQ(LastReported(key)->log_tail.at(0), "device=cpu speed=0.5");
  // The emulated device the rank runs on is reported busy.
  auto devices = transport_.received().back().devices;
  EXPECT_TRUE(devices.at(0).busy);
  EXPECT_FALSE(devices.at(1).busy);
  EXPECT_EQ(devices.at(0).node, "node-a");

  testing::WriteFile(go, "");
  ASSERT_TRUE(BeatUntil(*agent, [&] {
    auto w = LastReported(key);
    return w && w->state == WorkerState::kExited;
  }));
  EXPECT_EQ(LastReported(key)->exit_code, 3);
  // Still desired: reported as exited, never started again.
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(agent->Beat().ok());
  EXPECT_EQ(LastReported(key)->state, WorkerState::kExited);
  EXPECT_EQ(ReadFile(state_.path() / "starts.txt"), "started\n");

  // The controller stops listing it: forgotten after the next beat.
  controller_.Want({});
  ASSERT_TRUE(agent->Beat().ok());
  ASSERT_TRUE(agent->Beat().ok());
  EXPECT_FALSE(LastReported(key).has_value());
  EXPECT_EQ(ReadFile(state_.path() / "starts.txt"), "started\n");
}

// The agent of AgentTest over an inventory of the test's own.
class AgentLinksTest : public AgentTest {};

TEST_F(AgentLinksTest, EveryBeatCarriesTheDiscoveredLinks) {
  NodeInventory inv = TwoEmulatedDevices();
  inv.links = {{0, 1, LinkKind::kNvLink, 4, "internal"}};
  inventory_.Set(inv);
  auto agent = MakeAgent();
  ASSERT_TRUE(agent->Beat().ok());
  ASSERT_FALSE(transport_.received().empty());
  const std::vector<api::DeviceLink> links = transport_.received().back().links;
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0], (api::DeviceLink{0, 1, "nvlink", 4, "internal"}));
}

TEST_F(AgentLinksTest, DeviceRowsTravelOnlyWhenTheyChangedToAControllerThatKeepsThem) {
  bool keeps = false, ask = false;
  transport_.SetHandler([&](const api::HeartbeatRequest&) {
    api::HeartbeatResponse r;
    r.accepts_unchanged_inventory = keeps;
    r.send_inventory = ask;
    return api::ToJson(r);
  });
  auto agent = MakeAgent();
  // A controller that does not say it keeps inventories gets it every beat.
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(agent->Beat().ok());
  for (const auto& r : transport_.received()) {
    EXPECT_EQ(r.devices.size(), 2u);
    EXPECT_FALSE(r.inventory_unchanged);
  }
  keeps = true;
  ASSERT_TRUE(agent->Beat().ok());  // full (the last one said nothing)
  ASSERT_TRUE(agent->Beat().ok());  // unchanged: no rows
  auto beats = transport_.received();
  EXPECT_EQ(beats[2].devices.size(), 2u);
  EXPECT_TRUE(beats[3].inventory_unchanged);
  EXPECT_TRUE(beats[3].devices.empty());
  // The controller lost it: the next beat carries it again.
  ask = true;
  ASSERT_TRUE(agent->Beat().ok());
  ask = false;
  ASSERT_TRUE(agent->Beat().ok());
  beats = transport_.received();
  EXPECT_FALSE(beats[5].inventory_unchanged);
  EXPECT_EQ(beats[5].devices.size(), 2u);
}

TEST_F(AgentLinksTest, EveryBeatCarriesTheDeclaredNetworkLink) {
  for (bool declared : {true, false}) {
    NodeInventory inv = TwoEmulatedDevices();
    if (declared) inv.network = NetworkSpec{2.5e6, 0.005};
    inventory_.Set(inv);
    auto agent = MakeAgent();
    ASSERT_TRUE(agent->Beat().ok());
    ASSERT_FALSE(transport_.received().empty());
    const api::HeartbeatRequest sent = transport_.received().back();
    EXPECT_DOUBLE_EQ(sent.network.bandwidth_bytes_per_s, declared ? 2.5e6 : 0) << declared;
    EXPECT_DOUBLE_EQ(sent.network.latency_s, declared ? 0.005 : 0) << declared;
  }
}

// An idle node's beat is held up to an interval; while a worker runs, for
// busy_hold at most, so what the worker says between beats (a lost peer)
// reaches tesserad soon.
TEST_F(AgentTest, ABeatIsHeldShortWhileAWorkerRuns) {
  AgentOptions options;
  options.busy_hold = 200ms;
  auto agent = MakeAgent(options);
  controller_.Want({}, 2000);
  ASSERT_TRUE(agent->Beat().ok());
  ASSERT_TRUE(agent->Beat().ok());
  EXPECT_EQ(agent->next_wait_ms(), 2000) << "idle: held up to the interval";

  const auto go = state_.path() / "go";
  api::WorkerLaunch launch =
      ShellLaunch({1, 1, 0}, "while [ ! -e " + go.string() + " ]; do sleep 0.02; done");
  launch.device_indices = {0};
  controller_.Want({launch}, 2000);
  ASSERT_TRUE(BeatUntil(*agent, [&] {
    auto w = LastReported({1, 1, 0});
    return w && w->state == WorkerState::kRunning && agent->next_wait_ms() > 0;
  }));
  EXPECT_EQ(agent->next_wait_ms(), 200) << "a worker runs: held for busy_hold";

  testing::WriteFile(go, "");
  ASSERT_TRUE(BeatUntil(*agent, [&] {
    auto w = LastReported({1, 1, 0});
    return w && w->state == WorkerState::kExited && agent->next_wait_ms() > 0;
  }));
  EXPECT_EQ(agent->next_wait_ms(), 2000) << "its worker ended: idle again";
}

TEST_F(AgentTest, DroppedMessagesHealOnTheNextBeat) {
  WorkerKey key{2, 1, 0};
  controller_.Want({ShellLaunch(key, "exec sleep 60")});
  auto agent = MakeAgent();

  transport_.DropRequests(2);
  EXPECT_EQ(agent->Beat().code(), StatusCode::kUnavailable);
  EXPECT_EQ(agent->Beat().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(supervisor_->Get(key).has_value());  // nothing known yet, nothing started
  EXPECT_EQ(notifier_.ready, 0);
  ASSERT_TRUE(agent->Beat().ok());
  EXPECT_EQ(supervisor_->Get(key)->state, WorkerState::kRunning);

  // The controller no longer wants it, but its answers are lost: keep running.
  controller_.Want({});
  transport_.DropResponses(3);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(agent->Beat().ok());
  EXPECT_EQ(supervisor_->Get(key)->state, WorkerState::kRunning);
  ASSERT_TRUE(agent->Beat().ok());
  EXPECT_NE(supervisor_->Get(key)->state, WorkerState::kRunning);
  EXPECT_EQ(supervisor_->WaitForExit(key, 5s)->state, WorkerState::kExited);
  EXPECT_EQ(transport_.attempts(), 7);
}

TEST_F(AgentTest, EachProgressLineIsSentUntilABeatDeliversIt) {
  WorkerKey key{4, 1, 0};
  const auto more = state_.path() / "more";
  const auto wrote = state_.path() / "wrote";
  controller_.Want({ShellLaunch(
      key,
      "for s in 1 2 3; do printf '{\"step\":%s}\\n' $s >> \"$TESSERA_PROGRESS_FILE\"; done;"
      " while [ ! -e " +
          more.string() +
          " ]; do sleep 0.02; done;"
          " for s in 4 5; do printf '{\"step\":%s}\\n' $s >> \"$TESSERA_PROGRESS_FILE\"; done;"
          " touch " +
          wrote.string() + "; exec sleep 60")});
  auto agent = MakeAgent();
  auto steps = [&] {
    std::vector<int64_t> out;
    if (auto w = LastReported(key)) {
      for (const auto& line : w->progress_lines) out.push_back(line["step"].get<int64_t>());
    }
    return out;
  };
  ASSERT_TRUE(BeatUntil(*agent, [&] { return steps() == std::vector<int64_t>{1, 2, 3}; }));
  ASSERT_TRUE(agent->Beat().ok());
  EXPECT_TRUE(steps().empty()) << "delivered lines are not sent again";
  EXPECT_EQ(LastReported(key)->progress, (api::Json{{"step", 3}})) << "the newest still is";

  testing::WriteFile(more, "");
  ASSERT_TRUE(Eventually([&] { return std::filesystem::exists(wrote); }));
  transport_.DropResponses(1);  // it arrives, but the agent never learns that it did
  EXPECT_FALSE(agent->Beat().ok());
  EXPECT_EQ(steps(), (std::vector<int64_t>{4, 5}));
  ASSERT_TRUE(agent->Beat().ok());
  EXPECT_EQ(steps(), (std::vector<int64_t>{4, 5})) << "sent again: it may have been lost";
  ASSERT_TRUE(agent->Beat().ok());
  EXPECT_TRUE(steps().empty());
}

TEST_F(AgentTest, GarbledAnswerIsALostBeat) {
  WorkerKey key{3, 1, 0};
  transport_.SetHandler([](const api::HeartbeatRequest&) { return api::Json{{"desired", 5}}; });
  auto agent = MakeAgent();
  Status st = agent->Beat();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(supervisor_->Get(key).has_value());
}

TEST_F(AgentTest, LaunchOnAMissingDeviceIsReportedAsFailedNotRetried) {
  WorkerKey key{4, 1, 0};
  api::WorkerLaunch launch = ShellLaunch(key, "true");
  launch.device_indices = {7};
  controller_.Want({launch});
  auto agent = MakeAgent();
  ASSERT_TRUE(agent->Beat().ok());
  ASSERT_TRUE(agent->Beat().ok());
  auto w = LastReported(key);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->state, WorkerState::kExited);
  EXPECT_EQ(w->exit_code, kExitCodeLaunchFailed);
  ASSERT_FALSE(w->log_tail.empty());
  EXPECT_NE(w->log_tail.back().find("device_indices[0]"), std::string::npos);
}

TEST_F(AgentTest, ControllerSetsTheInterval) {
  controller_.Want({}, 250);
  auto agent = MakeAgent();
  ASSERT_TRUE(agent->Beat().ok());
  EXPECT_EQ(agent->heartbeat_interval(), 250ms);
}

TEST_F(AgentTest, RunBeatsUntilStoppedAndLeavesWorkersForReadoption) {
  WorkerKey key{5, 1, 0};
  controller_.Want({ShellLaunch(key, "exec sleep 60")}, 20);
  AgentOptions o;
  o.heartbeat_interval = 20ms;
  o.watchdog_interval = std::chrono::microseconds(10'000);
  auto agent = MakeAgent(o);
  std::thread loop([&] { agent->Run(); });
  EXPECT_TRUE(Eventually([&] {
    auto s = supervisor_->Get(key);
    return notifier_.ready == 1 && s && s->state == WorkerState::kRunning &&
           transport_.received().size() >= 3;
  }));
  agent->RequestReload();
  EXPECT_TRUE(Eventually([&] { return inventory_.loads >= 2; }));
  agent->RequestStop();
  loop.join();
  EXPECT_EQ(notifier_.stopping, 1);
  EXPECT_GT(notifier_.watchdog, 0);
  EXPECT_EQ(supervisor_->Get(key)->state, WorkerState::kRunning);  // left for re-adoption
}

TEST_F(AgentTest, StopWorkersOnExitStopsThem) {
  WorkerKey key{6, 1, 0};
  controller_.Want({ShellLaunch(key, "exec sleep 60")}, 20);
  AgentOptions o;
  o.heartbeat_interval = 20ms;
  o.stop_workers_on_exit = true;
  auto agent = MakeAgent(o);
  std::thread loop([&] { agent->Run(); });
  EXPECT_TRUE(Eventually([&] {
    auto s = supervisor_->Get(key);
    return s && s->state == WorkerState::kRunning;
  }));
  agent->RequestStop();
  loop.join();
  EXPECT_EQ(supervisor_->Get(key)->state, WorkerState::kExited);
}

TEST_F(AgentTest, FailedReloadKeepsThePreviousInventory) {
  auto agent = MakeAgent();
  inventory_.fail_next_load = true;
  agent->RequestReload();
  std::thread loop([&] { agent->Run(); });
  EXPECT_TRUE(Eventually([&] { return inventory_.loads >= 2; }));
  agent->RequestStop();
  loop.join();
  EXPECT_EQ(agent->inventory().devices.size(), 2u);
}

TEST_F(AgentTest, BadInventoryRefusesToStart) {
  inventory_.fail_next_load = true;
  Agent agent(AgentOptions{"node-a"}, &transport_, &inventory_, supervisor_.get());
  Status st = agent.Init();
  EXPECT_EQ(st.field(), "devices[0].memory");
}

}  // namespace
}  // namespace tessera::agent
