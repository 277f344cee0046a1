// JobController: infer jobs (the input becomes chunks, ranks get a lease
// token, the job succeeds only once every chunk is done). Fixture in
// job_controller_test_fixture.h.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon/controller/job_controller.h"
#include "tests/daemon/controller/job_controller_test_fixture.h"

namespace tessera::daemon::job_controller_test {
namespace {

// Infer jobs: the input becomes chunks, ranks get a lease token, and the job
// succeeds only once every chunk is done.
class InferControllerTest : public JobControllerTest {
 protected:
  void Configure() override {
    options_.lease_tokens = &tokens_;
    options_.infer_chunk_images = 4;
  }

  api::JobSpec InferSpec(const std::string& dataset) {
    api::JobSpec s = CmdSpec(2);
    s.kind = api::JobKind::kInfer;
    s.steps = 0;
    s.dataset = dataset;
    s.output = (dir_ / "out").string();
    return s;
  }

  std::string InputFolder(int images) {
    auto in = dir_ / "in";
    std::filesystem::create_directories(in);
    for (int i = 0; i < images; ++i) {
      std::ofstream(in / ("scan-" + std::to_string(1000 + i) + ".png")) << "png";
    }
    return in.string();
  }

  // Ticks until the job leaves `pending` (its input is listed in the
  // background), for at most 20 s.
  void TickWhilePending(api::JobId id) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    do {
      ASSERT_TRUE(controller_->Tick().ok());
      if (StateOf(id) != JobState::kPending) return;
      std::this_thread::sleep_for(milliseconds(2));
    } while (std::chrono::steady_clock::now() < deadline);
  }

  // An infer job over `images` images on node_ (2 devices), both ranks
  // reported running; *desired is what the node was asked to run.
  api::JobId StartInferJob(int images, api::HeartbeatResponse* desired) {
    Beat(node_);
    api::JobId id = Submit(InferSpec(InputFolder(images)));
    TickWhilePending(id);
    *desired = Beat(node_);
    Beat(node_, Running(*desired));
    EXPECT_TRUE(controller_->Tick().ok());
    return id;
  }

  // Rank `rank` of attempt 1 leases chunk 0 and reports it done, then every
  // rank on node_ exits 0 and the controller ticks.
  void FinishChunkZeroAndExit(api::JobId id, int64_t rank, const api::HeartbeatResponse& desired) {
    ASSERT_TRUE(store_->LeaseChunks({id, 1, rank, {}, 1, 0, 1000}).ok());
    ASSERT_TRUE(store_->LeaseChunks({id, 1, rank, {0}, 0, 0, 1000}).ok());
    Beat(node_, Exited(desired, 0));
    ASSERT_TRUE(controller_->Tick().ok());
  }

  // The growth lab: nodes a, b, ... (one device each). A train job holds
  // every node but a, an infer job of `spec` runs alone on a, then the train
  // job's ranks exit 0 and it ends: its devices are free.
  struct GrowLab {
    std::vector<api::Node> nodes;
    api::JobId infer = 0;
    std::map<std::string, api::HeartbeatResponse> desired;  // each node's last answer
  };
  GrowLab StartGrowLab(int node_count, const api::JobSpec& spec) {
    GrowLab lab;
    for (int i = 0; i < node_count; ++i) {
      lab.nodes.push_back(MakeNode(std::string(1, static_cast<char>('a' + i)), 1, 20));
    }
    std::vector<api::Node*> others;
    for (size_t i = 1; i < lab.nodes.size(); ++i) {
      Beat(lab.nodes[i]);
      others.push_back(&lab.nodes[i]);
    }
    std::map<std::string, api::HeartbeatResponse> held;
    const api::JobId train = SubmitRunning(CmdSpec(node_count - 1), others, &held);
    api::Node& a = lab.nodes[0];
    Beat(a);
    lab.infer = Submit(spec);
    TickWhilePending(lab.infer);
    lab.desired["a"] = Beat(a);
    EXPECT_EQ(lab.desired["a"].desired.size(), 1u);
    lab.desired["a"] = Beat(a, Running(lab.desired["a"]));
    EXPECT_TRUE(controller_->Tick().ok());
    EXPECT_EQ(StateOf(lab.infer), JobState::kRunning);
    for (api::Node* n : others) Beat(*n, Exited(held[n->name], 0));
    EXPECT_TRUE(controller_->Tick().ok());
    EXPECT_EQ(StateOf(train), JobState::kSucceeded);
    for (api::Node* n : others) lab.desired[n->name] = Beat(*n);  // the agents forget it
    return lab;
  }

  // Rounds of 250 ms: every node beats, its agent running what it was last
  // asked to, then a tick; until `until` holds or `rounds` ran. Returns the
  // rounds run.
  int Rounds(GrowLab* lab, int rounds, const std::function<bool()>& until = nullptr) {
    for (int i = 1; i <= rounds; ++i) {
      clock_.Advance(milliseconds(250));
      for (const api::Node& n : lab->nodes) {
        lab->desired[n.name] = Beat(n, Running(lab->desired[n.name]));
      }
      EXPECT_TRUE(controller_->Tick().ok());
      if (until && until()) return i;
    }
    return rounds;
  }

  // The infer job's ranks the nodes are asked to run, by rank: their node.
  std::map<int64_t, std::string> InferRanks(const GrowLab& lab) {
    std::map<int64_t, std::string> out;
    for (const api::Node& n : lab.nodes) {
      for (const api::WorkerLaunch& l : Beat(n, Running(lab.desired.at(n.name))).desired) {
        if (l.key.job_id == lab.infer) out[l.key.rank] = n.name;
      }
    }
    return out;
  }

  bool Grew(api::JobId id) { return Reasons(id).find("the inference grows") != std::string::npos; }

  // The agent's beat with `running`'s ranks running, each device busy while
  // they run there when `busy` (as a real agent reports it).
  api::HeartbeatResponse BeatRunning(const api::Node& n, const api::HeartbeatResponse& running,
                                     bool busy) {
    api::Node reported = n;
    for (api::Device& d : reported.devices) d.busy = busy && !running.desired.empty();
    return Beat(reported, Running(running));
  }

  // Three one-device nodes a, b, c and an infer job of 24 images (min 1
  // device, `priority`) placed on all three, every rank reported running.
  struct ThreeNodeInfer {
    std::vector<api::Node> nodes;
    api::JobId infer = 0;
    std::map<std::string, api::HeartbeatResponse> desired;  // each node's answer
  };
  ThreeNodeInfer StartInferOnThreeNodes(int64_t priority, bool busy) {
    ThreeNodeInfer lab;
    lab.nodes = {MakeNode("a", 1, 20), MakeNode("b", 1, 20), MakeNode("c", 1, 20)};
    for (const api::Node& n : lab.nodes) Beat(n);
    api::JobSpec spec = InferSpec(InputFolder(24));
    spec.min_devices = 1;
    spec.max_devices = 0;
    spec.priority = priority;
    lab.infer = Submit(spec);
    TickWhilePending(lab.infer);
    for (const api::Node& n : lab.nodes) lab.desired[n.name] = Beat(n);
    for (const api::Node& n : lab.nodes) {
      EXPECT_EQ(lab.desired[n.name].desired.size(), 1u) << n.name;
      BeatRunning(n, lab.desired[n.name], busy);
    }
    EXPECT_TRUE(controller_->Tick().ok());
    return lab;
  }

  const api::Node node_ = MakeNode("a", 2, 20);
  LeaseTokens tokens_{"controller-test-key"};
};

TEST_F(InferControllerTest, InputBecomesChunksAndRanksGetTheirLeaseToken) {
  api::Node a = Joined("a", 2, 20);
  api::JobId id = Submit(InferSpec(InputFolder(10)));
  // The first pass starts the listing; the job waits for it, then starts.
  ASSERT_TRUE(controller_->Tick().ok());
  TickWhilePending(id);
  EXPECT_EQ(StateOf(id), JobState::kStarting);
  EXPECT_EQ(*store_->CountChunks(id), (ChunkCounts{3, 0, 0, 10, 0}));
  auto chunks = store_->ListChunks(id);
  ASSERT_TRUE(chunks.ok());
  EXPECT_EQ(chunks->at(0).items.front(), "scan-1000.png");
  EXPECT_EQ(chunks->at(2).items, (std::vector<std::string>{"scan-1008.png", "scan-1009.png"}));

  auto desired = Beat(a);
  ASSERT_EQ(desired.desired.size(), 2u);
  std::set<std::string> handed;
  for (const api::WorkerLaunch& l : desired.desired) {
    ASSERT_TRUE(l.env.contains("TESSERA_LEASE_TOKEN"));
    // Each rank's own: valid for its rank, for no other.
    EXPECT_TRUE(tokens_.Check(l.env.at("TESSERA_LEASE_TOKEN"), id, 1, l.key.rank));
    EXPECT_FALSE(tokens_.Check(l.env.at("TESSERA_LEASE_TOKEN"), id, 1, 1 - l.key.rank));
    handed.insert(l.env.at("TESSERA_LEASE_TOKEN"));
  }
  EXPECT_EQ(handed.size(), 2u);
  // The token is handed out, never stored with the attempt.
  auto attempt = store_->GetAttempt(id, 1);
  ASSERT_TRUE(attempt.ok());
  EXPECT_EQ(attempt->plan.dump().find("TESSERA_LEASE_TOKEN"), std::string::npos);
}

// While every device is busy an infer job's input is listed meanwhile (so it
// can start as soon as a device frees up), and its reason follows: once
// listed, it waits for a device, not "listing input".
TEST_F(InferControllerTest, TheInputIsListedWhileEveryDeviceIsBusy) {
  api::Node a = Joined("a", 2, 20);
  std::map<std::string, api::HeartbeatResponse> desired;
  const api::JobId train = SubmitRunning(CmdSpec(2), {&a}, &desired);
  ASSERT_EQ(StateOf(train), JobState::kRunning);
  const api::JobId id = Submit(InferSpec(InputFolder(10)));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  do {
    clock_.Advance(std::chrono::seconds(1));
    Beat(a, Running(desired["a"]));  // the node stays healthy, the train job's ranks run
    ASSERT_TRUE(controller_->Tick().ok());
    if (*store_->CountChunks(id) == (ChunkCounts{3, 0, 0, 10, 0}) &&
        controller_->WaitingReason(id).starts_with("no free device")) {
      break;
    }
    std::this_thread::sleep_for(milliseconds(2));
  } while (std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(*store_->CountChunks(id), (ChunkCounts{3, 0, 0, 10, 0}));
  const std::string why = controller_->WaitingReason(id);
  EXPECT_TRUE(why.starts_with("no free device")) << "listed: it waits for a device: " << why;
  EXPECT_EQ(StateOf(id), JobState::kPending);
  EXPECT_EQ(StateOf(train), JobState::kRunning);
  const std::vector<api::QueueRow> queue = controller_->Queue();
  ASSERT_EQ(queue.size(), 1u);
  EXPECT_EQ(queue[0].reason, why);
}

TEST_F(InferControllerTest, UnreadableInputFailsTheJobWithTheReason) {
  Beat(MakeNode("a", 2, 20));
  api::JobId id = Submit(InferSpec((dir_ / "no-such-folder").string()));
  TickWhilePending(id);
  EXPECT_EQ(StateOf(id), JobState::kFailed);
  EXPECT_NE(store_->GetJob(id)->reason.find("cannot read the input"), std::string::npos)
      << store_->GetJob(id)->reason;
}

TEST_F(InferControllerTest, RanksThatExitBeforeEveryChunkIsDoneDoNotSucceed) {
  api::HeartbeatResponse desired;
  api::JobId id = StartInferJob(8, &desired);
  ASSERT_EQ(StateOf(id), JobState::kRunning);
  // One chunk done, then every rank exits 0.
  ASSERT_NO_FATAL_FAILURE(FinishChunkZeroAndExit(id, 0, desired));
  // Recovering (and retried at once: the first retry does not back off).
  std::string recovery;
  auto events = store_->ListEvents(id, 0, 100);
  ASSERT_TRUE(events.ok());
  for (const api::Event& e : events.value()) {
    if (e.to_state == "recovering") recovery = e.reason;
  }
  EXPECT_NE(recovery.find("before every chunk was done"), std::string::npos) << recovery;
}

TEST_F(InferControllerTest, SucceedsWhenEveryChunkIsDone) {
  api::HeartbeatResponse desired;
  api::JobId id = StartInferJob(4, &desired);
  ASSERT_EQ(StateOf(id), JobState::kRunning);
  ASSERT_NO_FATAL_FAILURE(FinishChunkZeroAndExit(id, 1, desired));
  EXPECT_EQ(StateOf(id), JobState::kSucceeded);
}

// An infer attempt whose ranks lease chunks independently loses only a dead
// node's ranks: the attempt goes on (no new attempt), the dead rank's leased
// chunk is leasable at once, and the job succeeds when the survivor is done.
TEST_F(InferControllerTest, ALostNodeCostsOnlyItsChunksAndTheAttemptGoesOn) {
  api::Node a = Joined("a", 1, 20), b = MakeNode("b", 1, 20);
  Beat(b);
  api::JobId id = Submit(InferSpec(InputFolder(12)));  // 3 chunks of 4
  TickWhilePending(id);
  std::map<std::string, api::HeartbeatResponse> desired = {{"a", Beat(a)}, {"b", Beat(b)}};
  ASSERT_EQ(desired["a"].desired.size(), 1u);
  ASSERT_EQ(desired["b"].desired.size(), 1u);
  Beat(a, Running(desired["a"]));
  Beat(b, Running(desired["b"]));
  ASSERT_TRUE(controller_->Tick().ok());
  ASSERT_EQ(StateOf(id), JobState::kRunning);
  const int64_t rank_a = desired["a"].desired[0].key.rank;
  const int64_t rank_b = desired["b"].desired[0].key.rank;
  const int64_t now = clock_.NowUnixMillis();
  // b's rank holds chunk 0 for 30 s; a's rank finished chunk 1.
  auto held = store_->LeaseChunks({id, 1, rank_b, {}, 1, now, now + 30'000});
  ASSERT_TRUE(held.ok());
  ASSERT_EQ(held->leased.size(), 1u);
  ASSERT_TRUE(store_->LeaseChunks({id, 1, rank_a, {}, 1, now, now + 30'000}).ok());
  ASSERT_TRUE(store_->LeaseChunks({id, 1, rank_a, {1}, 0, now, now + 30'000}).ok());

  // b falls silent until it is dead; a keeps beating with its rank running.
  for (int i = 0; i < 40 && store_->GetNode("b")->health != "dead"; ++i) {
    clock_.Advance(milliseconds(250));
    Beat(a, Running(desired["a"]));
    ASSERT_TRUE(controller_->Tick().ok());
  }
  ASSERT_EQ(store_->GetNode("b")->health, "dead");
  api::Job job = *store_->GetJob(id);
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.attempt, 1) << "no new attempt";
  EXPECT_NE(job.reason.find("node b lost"), std::string::npos) << job.reason;
  EXPECT_NE(job.reason.find("the other 1 rank go on"), std::string::npos) << job.reason;
  EXPECT_EQ(EventTrail(id).back(), "running");
  // a still runs its rank, unchanged.
  auto still = Beat(a, Running(desired["a"]));
  ASSERT_EQ(still.desired.size(), 1u);
  EXPECT_EQ(still.desired[0].key, desired["a"].desired[0].key);
  // A restarted controller adopts the attempt as it runs: b, back, is handed
  // nothing (its rank was dropped), a keeps its rank.
  RestartController();
  EXPECT_TRUE(Beat(b).desired.empty());
  still = Beat(a, Running(desired["a"]));
  ASSERT_EQ(still.desired.size(), 1u);
  EXPECT_EQ(still.desired[0].key, desired["a"].desired[0].key);
  // The chunk b held is a's to lease now (its lease had 30 s left).
  const int64_t later = clock_.NowUnixMillis();
  auto taken = store_->LeaseChunks({id, 1, rank_a, {}, 2, later, later + 30'000});
  ASSERT_TRUE(taken.ok());
  std::set<int64_t> numbers;
  for (const InferChunk& c : taken->leased) numbers.insert(c.chunk);
  EXPECT_TRUE(numbers.contains(held->leased[0].chunk));
  ASSERT_TRUE(store_->LeaseChunks({id, 1, rank_a, {0, 2}, 0, later, later + 30'000}).ok());
  Beat(a, Exited(desired["a"], 0));
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_EQ(StateOf(id), JobState::kSucceeded) << store_->GetJob(id)->reason;
}

// Inference fills the gaps: an infer job spread over every device gives two
// of its ranks' devices back when a train job arrives that needs two; the
// chunks they held are leasable at once, the infer job goes on with its
// lowest rank, and the next pass places the train job on the freed devices.
// An infer job of higher priority keeps its devices.
TEST_F(InferControllerTest, AnInferJobGivesDevicesBackToATrainJobThatNeedsThem) {
  for (int infer_priority : {5, 0}) {
    SCOPED_TRACE("infer priority " + std::to_string(infer_priority));
    TearDown();
    SetUp();
    auto [nodes, infer, desired] = StartInferOnThreeNodes(infer_priority, /*busy=*/false);
    ASSERT_EQ(StateOf(infer), JobState::kRunning);
    // Every rank holds a chunk for 30 s.
    const int64_t now = clock_.NowUnixMillis();
    std::map<int64_t, int64_t> chunk_of;
    for (const api::Node& n : nodes) {
      const int64_t rank = desired[n.name].desired[0].key.rank;
      auto held = store_->LeaseChunks({infer, 1, rank, {}, 1, now, now + 30'000});
      ASSERT_TRUE(held.ok());
      ASSERT_EQ(held->leased.size(), 1u);
      chunk_of[rank] = held->leased[0].chunk;
    }

    api::JobId train = Submit(CmdSpec(2));
    clock_.Advance(milliseconds(1100));
    ASSERT_TRUE(controller_->Tick().ok());
    ASSERT_TRUE(controller_->Tick().ok());
    api::Job infer_job = *store_->GetJob(infer);
    EXPECT_EQ(infer_job.state, JobState::kRunning);
    EXPECT_EQ(infer_job.attempt, 1);
    if (infer_priority > 0) {
      EXPECT_EQ(StateOf(train), JobState::kPending) << "a higher-priority infer job keeps them";
      continue;
    }
    EXPECT_NE(infer_job.reason.find("to job " + std::to_string(train) + " (train, alice)"),
              std::string::npos)
        << infer_job.reason;
    EXPECT_NE(infer_job.reason.find("the other 1 rank go on"), std::string::npos)
        << infer_job.reason;
    EXPECT_EQ(StateOf(train), JobState::kStarting);
    // The lowest rank still runs; the others' chunks are its to lease now.
    std::set<int64_t> still;
    for (const api::Node& n : nodes) {
      for (const auto& l : Beat(n).desired) {
        if (l.key.job_id == infer) still.insert(l.key.rank);
      }
    }
    ASSERT_EQ(still, (std::set<int64_t>{0}));
    // The job's progress counts rank 0 alone now.
    auto live = controller_->LiveRanks(infer, 1);
    ASSERT_TRUE(live.has_value());
    EXPECT_EQ(live->size(), 1u);
    EXPECT_TRUE(live->contains(0));
    const int64_t later = clock_.NowUnixMillis();
    auto taken = store_->LeaseChunks({infer, 1, 0, {}, 8, later, later + 30'000});
    ASSERT_TRUE(taken.ok());
    std::set<int64_t> numbers;
    for (const InferChunk& c : taken->leased) numbers.insert(c.chunk);
    for (const auto& [rank, chunk] : chunk_of) {
      if (rank != 0) {
        EXPECT_TRUE(numbers.contains(chunk)) << "chunk " << chunk;
      }
    }
  }
}

// An infer job gives back no more devices than the waiting train job's user
// may hold (users: max_devices): allowed one, bob's job, which would take
// both devices the infer job can spare, takes one of them, and the infer job
// keeps two ranks. (It gave back what the job's plan without the limit used;
// the queue pass, which keeps to the limit, then placed the job on fewer.)
TEST_F(InferControllerTest, AnInferJobGivesBackNoMoreThanTheTrainJobsUserMayHold) {
  for (const int64_t limit : {0, 1}) {
    SCOPED_TRACE("bob's max_devices " + std::to_string(limit));
    TearDown();
    options_.users.users.clear();
    if (limit > 0) options_.users.users["bob"].max_devices = limit;
    SetUp();
    auto [nodes, infer, desired] = StartInferOnThreeNodes(0, /*busy=*/false);
    ASSERT_EQ(StateOf(infer), JobState::kRunning);
    api::JobSpec spec = CmdSpec(1);
    spec.max_devices = 0;  // any number
    const api::JobId train = Submit(spec, "bob");
    clock_.Advance(milliseconds(1100));
    ASSERT_TRUE(controller_->Tick().ok());
    ASSERT_TRUE(controller_->Tick().ok());
    auto live = controller_->LiveRanks(infer, 1);
    ASSERT_TRUE(live.has_value());
    EXPECT_EQ(live->size(), limit > 0 ? 2u : 1u) << store_->GetJob(infer)->reason;
    EXPECT_NE(StateOf(train), JobState::kPending) << store_->GetJob(train)->reason;
  }
}

// A rank that gives its device back takes a moment to stop, its agent
// reporting it running and the device busy meanwhile. The yields that follow
// count that device as the train job's: a one-device train job takes one
// device from the infer job, not one more each second until it starts.
TEST_F(InferControllerTest, ADeviceStillBeingGivenBackIsTheTrainJobsNotAReasonToTakeAnother) {
  auto [nodes, infer, desired] = StartInferOnThreeNodes(0, /*busy=*/true);
  ASSERT_EQ(StateOf(infer), JobState::kRunning);

  api::JobId train = Submit(CmdSpec(1));
  for (int second = 0; second < 4; ++second) {
    clock_.Advance(milliseconds(1100));
    // Every rank the agents started still runs, the given one too.
    for (const api::Node& n : nodes) BeatRunning(n, desired[n.name], /*busy=*/true);
    ASSERT_TRUE(controller_->Tick().ok());
  }
  const std::string reasons = Reasons(infer);
  size_t gives = 0;
  for (size_t at = reasons.find(" to job "); at != std::string::npos;
       at = reasons.find(" to job ", at + 1)) {
    ++gives;
  }
  EXPECT_EQ(gives, 1u) << reasons;
  EXPECT_EQ(StateOf(train), JobState::kPending) << "its device is not free yet";
  // The given rank exits: the train job starts on its device.
  std::string given;
  for (const api::Node& n : nodes) {
    if (Beat(n, Running(desired[n.name])).desired.empty()) given = n.name;
  }
  ASSERT_FALSE(given.empty()) << reasons;
  for (const api::Node& n : nodes) {
    if (n.name == given) {
      Beat(n, Exited(desired[n.name], 0));
      Beat(n);
    }
  }
  clock_.Advance(milliseconds(1100));
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_EQ(StateOf(train), JobState::kStarting);
  const api::HeartbeatResponse on_given = Beat(*std::find_if(
      nodes.begin(), nodes.end(), [&](const api::Node& n) { return n.name == given; }));
  ASSERT_EQ(on_given.desired.size(), 1u);
  EXPECT_EQ(on_given.desired[0].key.job_id, train);
}

// The other half: an infer job placed on one device grows onto a device a
// train job leaves when it ends. The new rank joins the same attempt after
// the running one (its agent starts it at its next beat), leases chunks with
// its own token, and the stored attempt carries it through a controller
// restart.
TEST_F(InferControllerTest, AnInferJobGrowsOntoADeviceAnotherJobLeaves) {
  api::JobSpec spec = InferSpec(InputFolder(40));  // 10 chunks of 4
  spec.min_devices = 1;
  spec.max_devices = 0;
  GrowLab lab = StartGrowLab(2, spec);
  const api::JobId id = lab.infer;
  ASSERT_EQ(InferRanks(lab), (std::map<int64_t, std::string>{{0, "a"}}));
  // What the job's progress counts (InferenceTracker).
  EXPECT_EQ(controller_->LiveRanks(id, 1), (std::map<int64_t, std::string>{{0, "a:0"}}));
  EXPECT_EQ(controller_->LiveRanks(id, 2), std::nullopt);
  const int rounds = Rounds(&lab, 80, [&] { return Grew(id); });
  const std::string reasons = Reasons(id);
  ASSERT_TRUE(Grew(id)) << reasons;
  EXPECT_GE(rounds * 250, options_.grow_settle_ms) << "grown before the attempt settled";
  EXPECT_NE(reasons.find("running: devices b:0 are free: the inference grows to 2 ranks (rank 1 "
                         "joins and leases chunks like the others; 10 chunks not leased yet)"),
            std::string::npos)
      << reasons;
  api::Job job = *store_->GetJob(id);
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.attempt, 1) << "the same attempt";
  ASSERT_EQ(job.plan["replicas"].size(), 2u);
  EXPECT_EQ(job.plan["replicas"][1]["stages"][0]["devices"][0], "b:0");

  // b's agent is asked to run rank 1 of attempt 1, with its own lease token.
  const api::HeartbeatResponse on_b = Beat(lab.nodes[1], Running(lab.desired["b"]));
  ASSERT_EQ(on_b.desired.size(), 1u);
  const api::WorkerLaunch& joined = on_b.desired[0];
  EXPECT_EQ(joined.key, (api::WorkerKey{id, 1, 1}));
  EXPECT_EQ(joined.env.at("RANK"), "1");
  EXPECT_EQ(joined.env.at("WORLD_SIZE"), "2");
  ASSERT_TRUE(joined.env.contains("TESSERA_LEASE_TOKEN"));
  EXPECT_TRUE(tokens_.Check(joined.env.at("TESSERA_LEASE_TOKEN"), id, 1, 1));
  EXPECT_EQ(joined.argv, lab.desired["a"].desired.at(0).argv);
  // Not yet reported is not gone; once running it leases like any rank.
  Rounds(&lab, 4);
  EXPECT_EQ(StateOf(id), JobState::kRunning) << Reasons(id);
  EXPECT_EQ(InferRanks(lab), (std::map<int64_t, std::string>{{0, "a"}, {1, "b"}}));
  EXPECT_EQ(controller_->LiveRanks(id, 1),
            (std::map<int64_t, std::string>{{0, "a:0"}, {1, "b:0"}}));
  const int64_t now = clock_.NowUnixMillis();
  auto leased = store_->LeaseChunks({id, 1, 1, {}, 2, now, now + 30'000});
  ASSERT_TRUE(leased.ok());
  EXPECT_EQ(leased->leased.size(), 2u);

  // The stored attempt carries the new rank: a restarted controller hands it.
  auto stored = store_->GetAttempt(id, 1);
  ASSERT_TRUE(stored.ok());
  auto launch = AttemptLaunchFromJson(stored->plan);
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  ASSERT_EQ(launch->ranks.size(), 2u);
  EXPECT_EQ(launch->ranks[1].node, "b");
  controller_ = std::make_unique<JobController>(store_.get(), &clock_, options_);
  ASSERT_TRUE(controller_->Recover().ok());
  const api::HeartbeatResponse after = Beat(lab.nodes[1], Running(on_b));
  ASSERT_EQ(after.desired.size(), 1u);
  EXPECT_EQ(after.desired[0].key, joined.key);
  EXPECT_EQ(after.desired[0].env.at("RANK"), "1");
}

// Free devices go to waiting jobs first: no growth while a job waits; once it
// is gone, the infer job grows.
TEST_F(InferControllerTest, AnInferJobGrowsOnlyWhileNoJobWaits) {
  api::JobSpec spec = InferSpec(InputFolder(40));
  spec.min_devices = 1;
  spec.max_devices = 0;
  GrowLab lab = StartGrowLab(2, spec);
  // It needs more devices than the cluster has: it waits.
  const api::JobId waiting = Submit(CmdSpec(3));
  Rounds(&lab, 60);  // 15 s: past the settling and a check
  EXPECT_EQ(StateOf(waiting), JobState::kPending);
  EXPECT_FALSE(Grew(lab.infer)) << Reasons(lab.infer);
  EXPECT_EQ(InferRanks(lab).size(), 1u);
  const api::Job w = *store_->GetJob(waiting);
  ASSERT_TRUE(store_
                  ->TransitionJob({waiting, JobState::kPending, JobState::kCancelled, "cancelled",
                                   w.attempt, std::nullopt, clock_.NowUnixMillis()})
                  .ok());
  Rounds(&lab, 20, [&] { return Grew(lab.infer); });
  EXPECT_TRUE(Grew(lab.infer)) << Reasons(lab.infer);
  EXPECT_EQ(InferRanks(lab).size(), 2u);
}

// An infer job grows up to its max_devices, not beyond; one that is not
// elastic keeps the devices it started on.
TEST_F(InferControllerTest, AnInferJobGrowsUpToItsMaxDevices) {
  struct Case {
    int64_t max_devices;  // 0: no bound
    bool elastic;
    size_t ranks;  // after growing
  };
  for (const Case& c : {Case{1, true, 1}, Case{2, true, 2}, Case{0, true, 3}, Case{0, false, 1}}) {
    SCOPED_TRACE("max_devices " + std::to_string(c.max_devices) +
                 (c.elastic ? "" : ", not elastic"));
    TearDown();
    SetUp();
    api::JobSpec spec = InferSpec(InputFolder(40));
    spec.min_devices = 1;
    spec.max_devices = c.max_devices;
    spec.elastic = c.elastic;
    GrowLab lab = StartGrowLab(3, spec);
    Rounds(&lab, 60);  // 15 s: past the settling and a check
    EXPECT_EQ(InferRanks(lab).size(), c.ranks) << Reasons(lab.infer);
    EXPECT_EQ(Grew(lab.infer), c.ranks > 1) << Reasons(lab.infer);
    EXPECT_EQ(StateOf(lab.infer), JobState::kRunning);
  }
}

// There must be work to share: no growth while every chunk is leased (or
// done); one chunk nobody leased is enough.
TEST_F(InferControllerTest, AnInferJobGrowsOnlyWhileAChunkIsNotLeased) {
  struct Case {
    int64_t leased;  // of the job's 3 chunks, by its running rank
    bool grows;
  };
  for (const Case& c : {Case{3, false}, Case{2, true}}) {
    SCOPED_TRACE("leased " + std::to_string(c.leased));
    TearDown();
    SetUp();
    api::JobSpec spec = InferSpec(InputFolder(12));  // 3 chunks of 4
    spec.min_devices = 1;
    spec.max_devices = 0;
    GrowLab lab = StartGrowLab(2, spec);
    const int64_t now = clock_.NowUnixMillis();
    auto held = store_->LeaseChunks({lab.infer, 1, 0, {}, c.leased, now, now + 3'600'000});
    ASSERT_TRUE(held.ok());
    ASSERT_EQ(static_cast<int64_t>(held->leased.size()), c.leased);
    Rounds(&lab, 60);  // 15 s: past the settling and a check
    EXPECT_EQ(Grew(lab.infer), c.grows) << Reasons(lab.infer);
    EXPECT_EQ(InferRanks(lab).size(), c.grows ? 2u : 1u);
  }
}

}  // namespace
}  // namespace tessera::daemon::job_controller_test
