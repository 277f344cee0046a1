// The chunk lease side of ControlPlaneService, on a real SQLite file:
// tokens, fencing of ended attempts, durable completion, progress, metrics.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/fake_clock.h"
#include "daemon/auth/lease_tokens.h"
#include "daemon/control_plane_service.h"
#include "daemon/store/sqlite_store.h"
#include "tests/daemon/temp_dir.h"

namespace tessera::daemon {
namespace {

using api::JobState;

const api::Principal kAlice{"alice", api::Role::kUser};

TEST(LeaseTokensTest, TokenBelongsToOneJobAttemptAndRank) {
  LeaseTokens tokens("key-one");
  const std::string t = tokens.For(7, 2, 1);
  EXPECT_TRUE(t.starts_with("tsl_"));
  EXPECT_EQ(t.size(), 4u + 64u);
  EXPECT_TRUE(tokens.Check(t, 7, 2, 1));
  EXPECT_FALSE(tokens.Check(t, 7, 3, 1));
  EXPECT_FALSE(tokens.Check(t, 8, 2, 1));
  EXPECT_FALSE(tokens.Check(t, 7, 2, 0)) << "another rank, another token";
  // "lease:7:21:1" and "lease:72:1:1" must not meet: the separators are in the MAC.
  EXPECT_NE(tokens.For(7, 21, 1), tokens.For(72, 1, 1));
  EXPECT_FALSE(LeaseTokens("key-two").Check(t, 7, 2, 1)) << "another key, another token";
  EXPECT_FALSE(tokens.Check("", 7, 2, 1));
  auto random = LeaseTokens::WithRandomKey();
  ASSERT_TRUE(random.ok());
  EXPECT_NE(random->For(7, 2, 1), t);
}

class LeaseServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = SqliteStore::Open(dir_.File("tessera.db"));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    ControlPlaneOptions options;
    options.lease_tokens = &tokens_;
    options.lease_duration = std::chrono::milliseconds(10'000);
    service_ = std::make_unique<ControlPlaneService>(store_.get(), &clock_, options);
  }

  // An infer job of `chunks` chunks of 4 images, moved to running attempt 1.
  api::Job RunningInferJob(int chunks, api::JobKind kind = api::JobKind::kInfer) {
    api::JobSpec spec;
    spec.name = "restore";
    spec.kind = kind;
    spec.entrypoint = "builtin:colorize-unet";
    spec.dataset = "/srv/scans";
    spec.output = "/srv/out";
    spec.global_batch = 8;
    auto job = service_->SubmitJob(kAlice, spec);
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    std::vector<std::vector<std::string>> split(static_cast<size_t>(chunks));
    for (int c = 0; c < chunks; ++c) {
      for (int i = 0; i < 4; ++i) split[c].push_back(std::to_string(c) + "-" + std::to_string(i));
    }
    EXPECT_TRUE(store_->InsertChunks(job->id, split).ok());
    api::Json plan = {{"replicas",
                       {{{"batch", 4}, {"stages", {{{"devices", {"fast:0"}}}}}},
                        {{"batch", 4}, {"stages", {{{"devices", {"slow:0"}}}}}}}}};
    for (JobEvent e : {JobEvent::kPlan, JobEvent::kLaunch, JobEvent::kAllRunning}) {
      auto moved = service_->ApplyJobEvent(
          job->id, e, "", e == JobEvent::kPlan ? std::optional<api::Json>(plan) : std::nullopt);
      EXPECT_TRUE(moved.ok()) << moved.status().ToString();
    }
    return *store_->GetJob(job->id);
  }

  Result<api::LeaseResponse> Lease(const api::Job& job, int64_t rank, int64_t max,
                                   std::vector<api::CompletedChunk> done = {},
                                   int64_t attempt = 1) {
    api::LeaseRequest r{attempt, rank, max, std::move(done)};
    return service_->LeaseChunks(job.id, tokens_.For(job.id, attempt, rank), r);
  }

  testing::TempDir dir_;
  FakeClock clock_;
  LeaseTokens tokens_{"test-lease-key"};
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<ControlPlaneService> service_;
};

TEST_F(LeaseServiceTest, WrongTokenIsUnauthenticated) {
  api::Job job = RunningInferJob(2);
  api::LeaseRequest r{1, 0, 1, {}};
  struct Case {
    std::string token;
  } cases[] = {{""},
               {"tsl_00"},
               {tokens_.For(job.id, 2, 0)},
               {tokens_.For(job.id + 1, 1, 0)},
               {tokens_.For(job.id, 1, 1)}};  // rank 1's token, asking as rank 0
  for (const Case& c : cases) {
    auto answer = service_->LeaseChunks(job.id, c.token, r);
    EXPECT_EQ(answer.status().code(), StatusCode::kUnauthenticated) << c.token;
  }
  ControlPlaneService without(store_.get(), &clock_, {});
  EXPECT_EQ(without.LeaseChunks(job.id, tokens_.For(job.id, 1, 0), r).status().code(),
            StatusCode::kUnauthenticated);
}

TEST_F(LeaseServiceTest, OnlyTheCurrentAttemptOfAnInferJobLeases) {
  api::Job train = RunningInferJob(1, api::JobKind::kTrain);
  EXPECT_EQ(Lease(train, 0, 1).status().code(), StatusCode::kFailedPrecondition);
  api::Job job = RunningInferJob(2);
  auto stale = Lease(job, 0, 1, {}, /*attempt=*/2);
  EXPECT_EQ(stale.status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(service_->ApplyJobEvent(job.id, JobEvent::kCancel, "stop").ok());
  EXPECT_EQ(Lease(job, 0, 1).status().code(), StatusCode::kFailedPrecondition)
      << "a cancelled job leases nothing";
}

TEST_F(LeaseServiceTest, RanksShareTheChunksUntilFinished) {
  api::Job job = RunningInferJob(3);
  auto a = Lease(job, 0, 2);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->chunks.size(), 2u);
  EXPECT_EQ(a->chunks[0].items, (std::vector<std::string>{"0-0", "0-1", "0-2", "0-3"}));
  EXPECT_EQ(a->lease_ms, 10'000);
  EXPECT_FALSE(a->finished);
  auto b = Lease(job, 1, 2);
  ASSERT_EQ(b->chunks.size(), 1u);
  EXPECT_EQ(b->chunks[0].chunk, 2);
  auto wait = Lease(job, 1, 1, {{2, 4, 2.0}});
  ASSERT_TRUE(wait.ok());
  EXPECT_TRUE(wait->chunks.empty());
  EXPECT_FALSE(wait->finished) << "rank 0 still holds two chunks";
  EXPECT_GT(wait->retry_after_ms, 0);
  auto done = Lease(job, 0, 1, {{0, 4, 1.0}, {1, 4, 1.0}});
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(done->finished);
  EXPECT_EQ(done->retry_after_ms, 0);
  EXPECT_EQ(store_->CountChunks(job.id)->chunks_done, 3) << "completion is in the store";
}

TEST_F(LeaseServiceTest, SilentRankLosesItsLeaseToAnother) {
  api::Job job = RunningInferJob(1);
  ASSERT_EQ(Lease(job, 0, 1)->chunks.size(), 1u);
  clock_.Advance(std::chrono::milliseconds(9'999));
  EXPECT_TRUE(Lease(job, 1, 1)->chunks.empty());
  clock_.Advance(std::chrono::milliseconds(1));
  auto taken = Lease(job, 1, 1);
  ASSERT_EQ(taken->chunks.size(), 1u) << "the lease of rank 0 expired";
}

TEST_F(LeaseServiceTest, JobShowsProgressRatesAndEta) {
  api::Job job = RunningInferJob(4);
  EXPECT_TRUE(service_->GetJob(kAlice, job.id)->inference.is_object());
  ASSERT_TRUE(Lease(job, 0, 2).ok());
  ASSERT_TRUE(Lease(job, 1, 1).ok());
  ASSERT_TRUE(Lease(job, 0, 0, {{0, 4, 0.5}, {1, 4, 0.5}}).ok());  // 8 images/s
  ASSERT_TRUE(Lease(job, 1, 0, {{2, 4, 2.0}}).ok());               // 2 images/s
  auto got = service_->GetJob(kAlice, job.id);
  ASSERT_TRUE(got.ok());
  auto p = api::InferenceProgressFromJson(got->inference);
  ASSERT_TRUE(p.ok()) << got->inference.dump();
  EXPECT_EQ(p->images_total, 16);
  EXPECT_EQ(p->images_done, 12);
  EXPECT_EQ(p->chunks_done, 3);
  EXPECT_DOUBLE_EQ(p->images_per_s, 10.0);
  EXPECT_DOUBLE_EQ(p->eta_s, 0.4);
  ASSERT_EQ(p->devices.size(), 2u);
  EXPECT_EQ(p->devices[0].device, "fast:0");
  EXPECT_DOUBLE_EQ(p->devices[0].images_per_s, 8.0);
  EXPECT_EQ(p->devices[1].device, "slow:0");
  EXPECT_EQ(p->devices[1].images, 4);
  auto page = service_->ListJobs(kAlice, api::JobQuery{});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->jobs.at(0).inference, got->inference);

  std::string metrics;
  service_->AppendMetrics(&metrics);
  const std::string label = "{job=\"" + std::to_string(job.id) + "\"} ";
  EXPECT_NE(metrics.find("tessera_infer_images_total" + label + "16\n"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("tessera_infer_images_done" + label + "12\n"), std::string::npos);
  EXPECT_NE(metrics.find("tessera_infer_images_per_second" + label + "10\n"), std::string::npos);
}

// A running infer attempt drops ranks (their devices given back to training,
// their node lost) and takes new ones on devices that became free: the job's
// images/s and ETA follow the ranks that still work, not every rank that
// ever reported, and a rank that joined counts from its first chunk.
TEST_F(LeaseServiceTest, RateAndEtaFollowTheRanksThatStillWork) {
  std::optional<InferenceTracker::LiveRanks> live;  // what the controller says
  ControlPlaneOptions options;
  options.lease_tokens = &tokens_;
  options.lease_duration = std::chrono::milliseconds(10'000);
  options.live_ranks = [&live](api::JobId, int64_t attempt) {
    return attempt == 1 ? live : std::nullopt;
  };
  service_ = std::make_unique<ControlPlaneService>(store_.get(), &clock_, options);
  api::Job job = RunningInferJob(10);  // 40 images
  ASSERT_TRUE(Lease(job, 0, 2).ok());
  ASSERT_TRUE(Lease(job, 1, 1).ok());
  ASSERT_TRUE(Lease(job, 0, 0, {{0, 4, 0.5}, {1, 4, 0.5}}).ok());  // 8 images/s
  ASSERT_TRUE(Lease(job, 1, 0, {{2, 4, 2.0}}).ok());               // 2 images/s

  using Devices = std::vector<std::pair<int64_t, std::string>>;
  struct Step {
    const char* name;
    std::optional<InferenceTracker::LiveRanks> live;
    bool rank2_reports;  // rank 2 leases a chunk and reports it: 4 images in 0.5 s
    double images_per_s;
    double eta_s;
    Devices devices;
  };
  const Step steps[] = {
      {"not told: every rank that reported",
       std::nullopt,
       false,
       10,
       28 / 10.0,
       {{0, "fast:0"}, {1, "slow:0"}}},
      {"both run",
       InferenceTracker::LiveRanks{{0, "fast:0"}, {1, "slow:0"}},
       false,
       10,
       28 / 10.0,
       {{0, "fast:0"}, {1, "slow:0"}}},
      {"rank 1 gave its device back",
       InferenceTracker::LiveRanks{{0, "fast:0"}},
       false,
       8,
       28 / 8.0,
       {{0, "fast:0"}}},
      {"rank 2 joined on c:0",
       InferenceTracker::LiveRanks{{0, "fast:0"}, {2, "c:0"}},
       false,
       8,
       28 / 8.0,
       {{0, "fast:0"}, {2, "c:0"}}},
      {"rank 2 reported its first chunk",
       InferenceTracker::LiveRanks{{0, "fast:0"}, {2, "c:0"}},
       true,
       16,
       24 / 16.0,
       {{0, "fast:0"}, {2, "c:0"}}},
  };
  for (const Step& step : steps) {
    SCOPED_TRACE(step.name);
    live = step.live;
    if (step.rank2_reports) {
      auto leased = Lease(job, 2, 1);
      ASSERT_TRUE(leased.ok()) << leased.status().ToString();
      ASSERT_EQ(leased->chunks.size(), 1u);
      ASSERT_TRUE(Lease(job, 2, 0, {{leased->chunks[0].chunk, 4, 0.5}}).ok());
    }
    auto got = service_->GetJob(kAlice, job.id);
    ASSERT_TRUE(got.ok());
    auto p = api::InferenceProgressFromJson(got->inference);
    ASSERT_TRUE(p.ok()) << got->inference.dump();
    EXPECT_DOUBLE_EQ(p->images_per_s, step.images_per_s);
    EXPECT_DOUBLE_EQ(p->eta_s, step.eta_s);
    Devices devices;
    for (const api::DeviceThroughput& d : p->devices) devices.emplace_back(d.rank, d.device);
    EXPECT_EQ(devices, step.devices);
    std::string metrics;
    service_->AppendMetrics(&metrics);
    const std::string rate = "tessera_infer_images_per_second{job=\"" + std::to_string(job.id) +
                             "\"} " + std::to_string(static_cast<int>(step.images_per_s)) + "\n";
    EXPECT_NE(metrics.find(rate), std::string::npos) << metrics;
  }
}

TEST_F(LeaseServiceTest, TrainJobsHaveNoInferenceProgress) {
  api::Job train = RunningInferJob(0, api::JobKind::kTrain);
  EXPECT_TRUE(service_->GetJob(kAlice, train.id)->inference.is_null());
}

}  // namespace
}  // namespace tessera::daemon
