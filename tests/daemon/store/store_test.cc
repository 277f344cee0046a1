// The Store suite over every backend (tests/daemon/store/store_test_fixture.h):
// jobs and events, attempts, nodes, token and credential rows, entrypoints,
// stats; FaultyStore's own behaviour. The metrics history and inference
// chunks are in store_metrics_test.cc and store_chunks_test.cc.
#include "daemon/store/store.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/auth/token_crypto.h"
#include "daemon/store/faulty_store.h"
#include "daemon/store/memory_store.h"
#include "tests/daemon/store/store_test_fixture.h"

namespace tessera::daemon::store_test {
namespace {

using api::JobState;

TEST_P(StoreTest, IsHealthyWhenOpen) { EXPECT_TRUE(store_->Health().ok()); }

TEST_P(StoreTest, InsertJobAssignsIncreasingIdsAndRoundTrips) {
  api::Job a = Insert("alice", "first", 1234);
  api::Job b = Insert("alice", "second");
  EXPECT_GT(a.id, 0);
  EXPECT_GT(b.id, a.id);
  EXPECT_EQ(a.state, JobState::kPending);
  auto got = store_->GetJob(a.id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->owner, "alice");
  EXPECT_EQ(got->spec, Spec("first"));
  EXPECT_EQ(got->state, JobState::kPending);
  EXPECT_EQ(got->attempt, 0);
  EXPECT_EQ(got->created_ms, 1234);
  EXPECT_EQ(got->updated_ms, 1234);
  EXPECT_EQ(got->reason, "submitted");
  EXPECT_TRUE(got->plan.is_null());
  EXPECT_TRUE(got->progress.is_null());
}

TEST_P(StoreTest, InsertJobRefusesEmptyOwner) {
  auto job = store_->InsertJob(NewJob{"", Spec("x"), 1, "submitted"});
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().field(), "owner");
}

TEST_P(StoreTest, GetMissingJobIsNotFound) {
  EXPECT_EQ(store_->GetJob(4242).status().code(), StatusCode::kNotFound);
}

TEST_P(StoreTest, InsertJobWritesSubmissionEvent) {
  api::Job job = Insert("alice", "j", 777);
  auto events = store_->ListEvents(job.id, 0, 100);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].job_id, job.id);
  EXPECT_EQ((*events)[0].from_state, "");
  EXPECT_EQ((*events)[0].to_state, "pending");
  EXPECT_EQ((*events)[0].reason, "submitted");
  EXPECT_EQ((*events)[0].ts_ms, 777);
}

TEST_P(StoreTest, TransitionJobChangesStateAndAppendsEvent) {
  api::Job job = Insert("alice", "j");
  api::Json plan = {{"layout", "data"}, {"dp", 2}};
  auto moved = Move(job.id, JobState::kPending, JobState::kPlanned, "planned by test", 0, plan);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(moved->state, JobState::kPlanned);
  EXPECT_EQ(moved->plan, plan);
  EXPECT_EQ(moved->reason, "planned by test");
  EXPECT_EQ(moved->updated_ms, 2000);

  auto started = Move(job.id, JobState::kPlanned, JobState::kStarting, "launch", 1);
  ASSERT_TRUE(started.ok());
  EXPECT_EQ(started->attempt, 1);
  EXPECT_EQ(started->plan, plan) << "plan kept when the transition carries none";

  auto events = store_->ListEvents(job.id, 0, 100);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[1].from_state, "pending");
  EXPECT_EQ((*events)[1].to_state, "planned");
  EXPECT_EQ((*events)[1].reason, "planned by test");
  EXPECT_EQ((*events)[2].from_state, "planned");
  EXPECT_EQ((*events)[2].to_state, "starting");
  EXPECT_EQ((*events)[2].attempt, 1);
  EXPECT_EQ((*events)[2].ts_ms, 2000);
}

TEST_P(StoreTest, TransitionJobIsCompareAndSet) {
  api::Job job = Insert("alice", "j");
  auto refused = Move(job.id, JobState::kRunning, JobState::kSucceeded, "wrong expectation");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("pending"), std::string::npos);
  // Neither the state nor the event log changed.
  EXPECT_EQ(store_->GetJob(job.id)->state, JobState::kPending);
  EXPECT_EQ(store_->ListEvents(job.id, 0, 100)->size(), 1u);
  // Two racers expecting the same state: exactly one wins.
  EXPECT_TRUE(Move(job.id, JobState::kPending, JobState::kCancelled, "first").ok());
  EXPECT_EQ(Move(job.id, JobState::kPending, JobState::kPlanned, "second").status().code(),
            StatusCode::kFailedPrecondition);
}

TEST_P(StoreTest, TransitionMissingJobIsNotFound) {
  EXPECT_EQ(Move(999, JobState::kPending, JobState::kPlanned, "x").status().code(),
            StatusCode::kNotFound);
}

TEST_P(StoreTest, ListJobsPagesWithCursorAndFilters) {
  std::vector<api::JobId> alice;
  for (int i = 0; i < 5; ++i) {
    alice.push_back(Insert("alice", "a" + std::to_string(i)).id);
    Insert("bob", "b" + std::to_string(i));
  }
  ASSERT_TRUE(Move(alice[1], JobState::kPending, JobState::kCancelled, "c").ok());

  api::JobQuery q;
  q.owner = "alice";
  q.limit = 2;
  std::vector<api::JobId> seen;
  int pages = 0;
  while (true) {
    auto page = store_->ListJobs(q);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    ++pages;
    for (const api::Job& j : page->jobs) {
      EXPECT_EQ(j.owner, "alice");
      seen.push_back(j.id);
    }
    if (!page->next_after) break;
    EXPECT_EQ(*page->next_after, page->jobs.back().id);
    q.after = *page->next_after;
  }
  EXPECT_EQ(seen, alice);
  EXPECT_EQ(pages, 3);

  api::JobQuery by_state;
  by_state.state = JobState::kCancelled;
  auto cancelled = store_->ListJobs(by_state);
  ASSERT_TRUE(cancelled.ok());
  ASSERT_EQ(cancelled->jobs.size(), 1u);
  EXPECT_EQ(cancelled->jobs[0].id, alice[1]);
  EXPECT_FALSE(cancelled->next_after);

  api::JobQuery all;
  all.limit = 100;
  EXPECT_EQ(store_->ListJobs(all)->jobs.size(), 10u);
  api::JobQuery exact;
  exact.limit = 10;
  auto page = store_->ListJobs(exact);
  EXPECT_EQ(page->jobs.size(), 10u);
  EXPECT_FALSE(page->next_after) << "a full last page has no cursor";
}

TEST_P(StoreTest, ListEventsPagesAndSeparatesJobs) {
  api::Job a = Insert("alice", "a");
  api::Job b = Insert("alice", "b");
  ASSERT_TRUE(Move(a.id, JobState::kPending, JobState::kPlanned, "1").ok());
  ASSERT_TRUE(Move(b.id, JobState::kPending, JobState::kPlanned, "x").ok());
  ASSERT_TRUE(Move(a.id, JobState::kPlanned, JobState::kStarting, "2", 1).ok());
  ASSERT_TRUE(Move(a.id, JobState::kStarting, JobState::kRunning, "3", 1).ok());

  auto first = store_->ListEvents(a.id, 0, 2);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 2u);
  EXPECT_EQ((*first)[0].reason, "submitted");
  EXPECT_EQ((*first)[1].reason, "1");
  auto rest = store_->ListEvents(a.id, first->back().id, 100);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->size(), 2u);
  EXPECT_EQ((*rest)[0].reason, "2");
  EXPECT_EQ((*rest)[1].reason, "3");
  EXPECT_LT((*first)[1].id, (*rest)[0].id);
  EXPECT_EQ(store_->ListEvents(b.id, 0, 100)->size(), 2u);
  EXPECT_TRUE(store_->ListEvents(12345, 0, 100)->empty());
}

TEST_P(StoreTest, SetJobProgressStoresLatest) {
  api::Job job = Insert("alice", "j");
  api::Json p1 = {{"step", 10}};
  api::Json p2 = {{"step", 20}, {"loss", 0.5}};
  ASSERT_TRUE(store_->SetJobProgress(job.id, p1).ok());
  ASSERT_TRUE(store_->SetJobProgress(job.id, p2).ok());
  EXPECT_EQ(store_->GetJob(job.id)->progress, p2);
  EXPECT_EQ(store_->SetJobProgress(999, p1).code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->ListEvents(job.id, 0, 100)->size(), 1u) << "progress is not an event";
}

TEST_P(StoreTest, CountJobsByStateListsEveryState) {
  api::Job a = Insert("alice", "a");
  Insert("alice", "b");
  Insert("bob", "c");
  ASSERT_TRUE(Move(a.id, JobState::kPending, JobState::kPlanned, "p").ok());
  auto counts = store_->CountJobsByState();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->size(), 8u);
  EXPECT_EQ(counts->at(JobState::kPending), 2);
  EXPECT_EQ(counts->at(JobState::kPlanned), 1);
  EXPECT_EQ(counts->at(JobState::kRunning), 0);
}

TEST_P(StoreTest, AttemptsCrud) {
  api::Job job = Insert("alice", "j");
  api::Json plan = {{"layout", "pipeline"}};
  JobAttempt a1{job.id, 1, plan, 100, std::nullopt, ""};
  JobAttempt a2{job.id, 2, api::Json(), 200, std::nullopt, ""};
  ASSERT_TRUE(store_->InsertAttempt(a2).ok());
  ASSERT_TRUE(store_->InsertAttempt(a1).ok());
  Status dup = store_->InsertAttempt(a1);
  EXPECT_EQ(dup.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->InsertAttempt(JobAttempt{999, 1, {}, 1, {}, ""}).code(), StatusCode::kNotFound);

  auto got = store_->GetAttempt(job.id, 1);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, a1);
  auto list = store_->ListAttempts(job.id);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].attempt, 1);
  EXPECT_EQ((*list)[1].attempt, 2);

  ASSERT_TRUE(store_->FinishAttempt(job.id, 1, 150, "rank 2 exited 137").ok());
  got = store_->GetAttempt(job.id, 1);
  EXPECT_EQ(got->ended_ms, 150);
  EXPECT_EQ(got->result, "rank 2 exited 137");
  EXPECT_EQ(store_->FinishAttempt(job.id, 9, 1, "x").code(), StatusCode::kNotFound);

  // A re-formed attempt's plan replaces the stored one; the rest stays.
  const api::Json reformed = {{"layout", "data"}, {"dropped_ranks", {2}}};
  ASSERT_TRUE(store_->SetAttemptPlan(job.id, 1, reformed).ok());
  got = store_->GetAttempt(job.id, 1);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->plan, reformed);
  EXPECT_EQ(got->started_ms, 100);
  EXPECT_EQ(got->result, "rank 2 exited 137");
  EXPECT_EQ(store_->GetAttempt(job.id, 2)->plan, api::Json());
  EXPECT_EQ(store_->SetAttemptPlan(job.id, 9, reformed).code(), StatusCode::kNotFound);

  ASSERT_TRUE(store_->DeleteAttempt(job.id, 2).ok());
  EXPECT_EQ(store_->GetAttempt(job.id, 2).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->DeleteAttempt(job.id, 2).code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->ListAttempts(job.id)->size(), 1u);
}

TEST_P(StoreTest, UpsertNodeReplacesDevicesAndKeepsEmulatedFlag) {
  api::Node n;
  n.name = "boxA";
  n.address = "10.0.0.1";
  n.last_heartbeat_ms = 500;
  n.devices = {Dev(1, true), Dev(0, false)};
  ASSERT_TRUE(store_->UpsertNode(n).ok());
  auto got = store_->GetNode("boxA");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->address, "10.0.0.1");
  EXPECT_EQ(got->health, "healthy");
  EXPECT_EQ(got->last_heartbeat_ms, 500);
  ASSERT_EQ(got->devices.size(), 2u);
  EXPECT_EQ(got->devices[0].index, 0);
  EXPECT_FALSE(got->devices[0].emulated);
  EXPECT_EQ(got->devices[1].index, 1);
  EXPECT_TRUE(got->devices[1].emulated);
  EXPECT_EQ(got->devices[1].node, "boxA");
  EXPECT_EQ(got->devices[1].memory_bytes, 80'000'000'000);
  EXPECT_DOUBLE_EQ(got->devices[1].relative_speed, 0.5);

  n.address = "10.0.0.2";
  n.last_heartbeat_ms = 900;
  n.devices = {Dev(3, true)};
  ASSERT_TRUE(store_->UpsertNode(n).ok());
  got = store_->GetNode("boxA");
  EXPECT_EQ(got->address, "10.0.0.2");
  EXPECT_EQ(got->last_heartbeat_ms, 900);
  ASSERT_EQ(got->devices.size(), 1u);
  EXPECT_EQ(got->devices[0].index, 3);

  api::Node other;
  other.name = "aardvark";
  ASSERT_TRUE(store_->UpsertNode(other).ok());
  auto all = store_->ListNodes();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].name, "aardvark");
  EXPECT_EQ((*all)[1].name, "boxA");
  EXPECT_EQ((*all)[1].devices.size(), 1u);
  EXPECT_EQ(store_->GetNode("nope").status().code(), StatusCode::kNotFound);
}

TEST_P(StoreTest, UpsertNodeKeepsDeviceLinks) {
  api::Node n;
  n.name = "boxA";
  n.devices = {Dev(0, false), Dev(1, false), Dev(2, false)};
  n.links = {{0, 1, "nvlink", 4, "internal"}, {0, 2, "system", 0, "system"}};
  n.cpu_cores = 64;
  ASSERT_TRUE(store_->UpsertNode(n).ok());
  auto got = store_->GetNode("boxA");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->links, n.links);
  EXPECT_EQ(got->cpu_cores, 64);
  EXPECT_EQ(store_->ListNodes()->at(0).links, n.links);
  n.links = {};
  ASSERT_TRUE(store_->UpsertNode(n).ok());
  EXPECT_TRUE(store_->GetNode("boxA")->links.empty()) << "a heartbeat replaces the links";

  struct Case {
    api::DeviceLink link;
    std::string why;
  } bad[] = {{{0, 7, "pcie", 0, ""}, "unknown device"},
             {{1, 0, "pcie", 0, ""}, "a > b"},
             {{1, 1, "pcie", 0, ""}, "a == b"}};
  for (const Case& c : bad) {
    n.links = {c.link};
    Status s = store_->UpsertNode(n);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.why;
    EXPECT_EQ(s.field(), "links[0]") << c.why;
  }
  n.links = {{0, 1, "pcie", 0, ""}, {0, 1, "nvlink", 2, ""}};
  EXPECT_EQ(store_->UpsertNode(n).field(), "links[1]") << "duplicate pair";
}

TEST_P(StoreTest, NodeNetworkLinkSurvivesUpsertAndReopen) {
  api::Node n;
  n.name = "boxA";
  n.devices = {Dev(0, true)};
  n.network.bandwidth_bytes_per_s = 2.5e6;
  n.network.latency_s = 0.005;
  n.gloo_link.bandwidth_bytes_per_s = 1e9;
  n.gloo_link.latency_s = 5e-4;
  n.gloo_link.cpu_per_hop_s = 3e-4;
  ASSERT_TRUE(store_->UpsertNode(n).ok());
  auto got = store_->GetNode("boxA");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_DOUBLE_EQ(got->network.bandwidth_bytes_per_s, 2.5e6);
  EXPECT_DOUBLE_EQ(got->network.latency_s, 0.005);
  EXPECT_DOUBLE_EQ(got->gloo_link.bandwidth_bytes_per_s, 1e9);
  EXPECT_DOUBLE_EQ(got->gloo_link.latency_s, 5e-4);
  EXPECT_DOUBLE_EQ(got->gloo_link.cpu_per_hop_s, 3e-4);
  EXPECT_DOUBLE_EQ(store_->ListNodes()->at(0).network.bandwidth_bytes_per_s, 2.5e6);

  // A second node that reports no link; the first one's link outlives a reopen.
  api::Node unknown = n;
  unknown.name = "boxB";
  unknown.network.bandwidth_bytes_per_s = 0;
  unknown.network.latency_s = 0;
  ASSERT_TRUE(store_->UpsertNode(unknown).ok());
  Reopen();
  got = store_->GetNode("boxA");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_DOUBLE_EQ(got->network.bandwidth_bytes_per_s, 2.5e6);
  EXPECT_DOUBLE_EQ(got->network.latency_s, 0.005);
  EXPECT_EQ(store_->GetNode("boxB")->network.bandwidth_bytes_per_s, 0);

  // The next heartbeat's link replaces it.
  n.network.bandwidth_bytes_per_s = 125e6;
  n.network.latency_s = 50e-6;
  ASSERT_TRUE(store_->UpsertNode(n).ok());
  EXPECT_DOUBLE_EQ(store_->GetNode("boxA")->network.bandwidth_bytes_per_s, 125e6);
  EXPECT_DOUBLE_EQ(store_->GetNode("boxA")->network.latency_s, 50e-6);
}

TEST_P(StoreTest, UpsertNodeRefusesBadInput) {
  api::Node unnamed;
  EXPECT_EQ(store_->UpsertNode(unnamed).code(), StatusCode::kInvalidArgument);
  api::Node dup;
  dup.name = "n";
  dup.devices = {Dev(0, true), Dev(0, true)};
  Status s = store_->UpsertNode(dup);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.field(), "devices[1].index");
  api::Node sick;
  sick.name = "n";
  sick.health = "sick";
  EXPECT_EQ(store_->UpsertNode(sick).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->GetNode("n").status().code(), StatusCode::kNotFound);
}

TEST_P(StoreTest, SetNodeHealth) {
  api::Node n;
  n.name = "boxB";
  n.devices = {Dev(0, true)};
  ASSERT_TRUE(store_->UpsertNode(n).ok());
  ASSERT_TRUE(store_->SetNodeHealth("boxB", "dead").ok());
  EXPECT_EQ(store_->GetNode("boxB")->health, "dead");
  EXPECT_EQ(store_->GetNode("boxB")->devices.size(), 1u);
  EXPECT_EQ(store_->SetNodeHealth("boxB", "zombie").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->SetNodeHealth("nope", "dead").code(), StatusCode::kNotFound);
}

// Tokens are rows: the store keeps and returns them; whether a presented
// token is valid is daemon/auth/api_tokens.h's (tests/daemon/auth/).
TEST_P(StoreTest, CreateTokenStoresTheDigestNotTheSecret) {
  auto issued = store_->CreateToken("alice", api::Role::kAdmin, 42);
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_TRUE(issued->plaintext.starts_with("tsr_" + issued->info.id + "_"));
  EXPECT_EQ(issued->info, (TokenInfo{issued->info.id, "alice", api::Role::kAdmin, 42, {}}));
  auto row = store_->GetToken(issued->info.id);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  EXPECT_EQ(row->info, issued->info);
  const std::string secret = issued->plaintext.substr(issued->plaintext.rfind('_') + 1);
  EXPECT_FALSE(row->secret.salt.empty());
  EXPECT_EQ(row->secret.hash, *SaltedSha256(row->secret.salt, secret));
  EXPECT_EQ(store_->GetToken("feedfeedfeedfeed").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->CreateToken("", api::Role::kUser, 1).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_P(StoreTest, InsertTokenKeepsTheRowAsGiven) {
  const TokenRecord revoked{TokenInfo{"00000000000000aa", "carol", api::Role::kUser, 5, 6},
                            SecretDigest{"salt", "hash"}};
  ASSERT_TRUE(store_->InsertToken(revoked).ok());
  EXPECT_EQ(*store_->GetToken("00000000000000aa"), revoked) << "a revoked row is still a row";
  Reopen();
  EXPECT_EQ(*store_->GetToken("00000000000000aa"), revoked);

  struct Row {
    const char* what;
    TokenRecord record;
    StatusCode want;
    std::string field;
  };
  const Row rows[] = {
      {"id in use", revoked, StatusCode::kAlreadyExists, ""},
      {"no id", TokenRecord{TokenInfo{"", "carol", api::Role::kUser, 1, {}}, {}},
       StatusCode::kInvalidArgument, "id"},
      {"no user", TokenRecord{TokenInfo{"00000000000000bb", "", api::Role::kUser, 1, {}}, {}},
       StatusCode::kInvalidArgument, "user"},
  };
  for (const Row& row : rows) {
    Status st = store_->InsertToken(row.record);
    EXPECT_EQ(st.code(), row.want) << row.what << ": " << st.ToString();
    if (!row.field.empty()) {
      EXPECT_EQ(st.field(), row.field) << row.what;
    }
  }
  EXPECT_EQ(store_->ListTokens()->size(), 1u) << "refused rows are not written";
}

TEST_P(StoreTest, RevokeTokenKeepsTheFirstRevocationTime) {
  auto t1 = store_->CreateToken("bob", api::Role::kUser, 1);
  auto t2 = store_->CreateToken("bob", api::Role::kUser, 2);
  ASSERT_TRUE(t1.ok() && t2.ok());
  ASSERT_TRUE(store_->RevokeToken(t1->info.id, 10).ok());
  EXPECT_EQ(store_->GetToken(t1->info.id)->info.revoked_ms, 10);
  EXPECT_FALSE(store_->GetToken(t2->info.id)->info.revoked_ms) << "other rows are unchanged";
  EXPECT_TRUE(store_->RevokeToken(t1->info.id, 20).ok()) << "revoking twice is fine";
  EXPECT_EQ(store_->RevokeToken("feedfeedfeedfeed", 1).code(), StatusCode::kNotFound);

  auto list = store_->ListTokens();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  for (const TokenInfo& t : *list) {
    if (t.id == t1->info.id) {
      EXPECT_EQ(t.revoked_ms, 10) << "first revocation time kept";
    } else {
      EXPECT_FALSE(t.revoked_ms);
    }
  }
}

TEST_P(StoreTest, ListTokensOrderedByUserWithoutSecrets) {
  auto z = store_->CreateToken("zoe", api::Role::kUser, 1);
  auto a = store_->CreateToken("adam", api::Role::kAdmin, 2);
  ASSERT_TRUE(z.ok() && a.ok());
  auto list = store_->ListTokens();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0], a->info);
  EXPECT_EQ((*list)[1], z->info);
}

TEST_P(StoreTest, EntrypointsAreSeededAndEditable) {
  auto list = store_->ListEntrypoints();
  ASSERT_TRUE(list.ok());
  std::vector<std::string> names;
  for (const api::Entrypoint& e : *list) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"builtin:classifier-resnet", "builtin:colorize-unet",
                                             "builtin:denoiser-dncnn", "builtin:gan-pix2pix"}));

  api::Entrypoint cmd{"cmd:my-train", "/opt/lab/train.py", "lab script"};
  ASSERT_TRUE(store_->PutEntrypoint(cmd).ok());
  auto got = store_->GetEntrypoint("cmd:my-train");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->command, "/opt/lab/train.py");
  EXPECT_EQ(got->description, "lab script");
  cmd.description = "updated";
  ASSERT_TRUE(store_->PutEntrypoint(cmd).ok());
  EXPECT_EQ(store_->GetEntrypoint("cmd:my-train")->description, "updated");
  EXPECT_EQ(store_->ListEntrypoints()->size(), 5u);

  EXPECT_EQ(store_->PutEntrypoint({"cmd:rel", "train.py", ""}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->PutEntrypoint({"shell:rm", "/bin/rm", ""}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->PutEntrypoint({"builtin:x", "/bin/x", ""}).code(),
            StatusCode::kInvalidArgument);

  ASSERT_TRUE(store_->DeleteEntrypoint("cmd:my-train").ok());
  EXPECT_EQ(store_->GetEntrypoint("cmd:my-train").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->DeleteEntrypoint("cmd:my-train").code(), StatusCode::kNotFound);
}

// Every backend checks an entrypoint's shape the same way: a builtin: has no
// command, a cmd: or model: has the absolute path of its file.
TEST_P(StoreTest, PutEntrypointChecksTheShapeOfEachKind) {
  struct Row {
    api::Entrypoint entrypoint;
    const char* field;  // nullptr: stored
  } rows[] = {
      {{"builtin:lab-net", "", ""}, nullptr},
      {{"builtin:x", "/bin/x", ""}, "command"},
      {{"builtin:", "", ""}, "name"},
      {{"cmd:my-train", "/opt/lab/train.py", ""}, nullptr},
      {{"cmd:rel", "train.py", ""}, "command"},
      {{"cmd:none", "", ""}, "command"},
      {{"model:lab-unet", "/srv/models/unet.pt2", "exported U-Net"}, nullptr},
      {{"model:rel", "models/unet.pt", ""}, "command"},
      {{"model:none", "", ""}, "command"},
      {{"model:", "/srv/models/unet.pt", ""}, "name"},
      {{"shell:rm", "/bin/rm", ""}, "name"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.entrypoint.name + " " + row.entrypoint.command);
    Status st = store_->PutEntrypoint(row.entrypoint);
    if (row.field == nullptr) {
      ASSERT_TRUE(st.ok()) << st.ToString();
      auto got = store_->GetEntrypoint(row.entrypoint.name);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(got->command, row.entrypoint.command);
      EXPECT_EQ(got->description, row.entrypoint.description);
    } else {
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
      EXPECT_EQ(st.field(), row.field) << st.ToString();
      EXPECT_EQ(store_->GetEntrypoint(row.entrypoint.name).status().code(), StatusCode::kNotFound);
    }
  }
}

TEST_P(StoreTest, AgentJoinTokenIsOneDigestRow) {
  EXPECT_EQ(store_->GetAgentJoinToken().status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->SetAgentJoinToken("").code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(store_->SetAgentJoinToken("join-me-please").ok());
  auto digest = store_->GetAgentJoinToken();
  ASSERT_TRUE(digest.ok()) << digest.status().ToString();
  EXPECT_EQ(digest->hash, *SaltedSha256(digest->salt, "join-me-please"));
  const SecretDigest rotated{"other-salt", "other-hash"};
  ASSERT_TRUE(store_->PutAgentJoinToken(rotated).ok());
  EXPECT_EQ(*store_->GetAgentJoinToken(), rotated) << "one row, replaced";
  Reopen();
  EXPECT_EQ(*store_->GetAgentJoinToken(), rotated);
}

// A node credential row with a made-up digest (the store does not look at it).
NodeCredentialRecord Credential(std::string node, std::string id, int64_t enrolled_ms) {
  NodeCredentialRecord r;
  r.enrolment.node = std::move(node);
  r.enrolment.credential_id = std::move(id);
  r.enrolment.enrolled_ms = enrolled_ms;
  r.secret = SecretDigest{"salt-" + r.enrolment.credential_id, "hash-" + r.enrolment.credential_id};
  return r;
}

// Node credentials are rows written by compare-and-set; the enrolment rules
// and the credential check are daemon/auth/node_credentials.h's. Each row is
// one call, in order, and the code it must give.
TEST_P(StoreTest, NodeCredentialRowsAreWrittenByCompareAndSet) {
  const NodeCredentialRecord a1 = Credential("boxa", "00000000000000a1", 1000);
  const NodeCredentialRecord a2 = Credential("boxa", "00000000000000a2", 1100);
  NodeCredentialRecord a2_used = a2;
  a2_used.enrolment.first_used_ms = 2000;
  const NodeCredentialRecord b1 = Credential("boxb", "00000000000000b1", 1200);
  const NodeCredentialRecord b_taking_a2s_id = Credential("boxb", "00000000000000a2", 1300);
  using Expected = std::optional<api::NodeEnrolment>;
  struct Row {
    const char* what;
    std::function<Status()> call;
    StatusCode want;
  };
  const Row rows[] = {
      {"put a1, none expected", [&] { return store_->PutNodeCredential(a1, Expected()); },
       StatusCode::kOk},
      {"put a2, none expected but a1 is there",
       [&] { return store_->PutNodeCredential(a2, Expected()); }, StatusCode::kFailedPrecondition},
      {"put a2 over a1", [&] { return store_->PutNodeCredential(a2, a1.enrolment); },
       StatusCode::kOk},
      {"put over a stale a1", [&] { return store_->PutNodeCredential(a1, a1.enrolment); },
       StatusCode::kFailedPrecondition},
      {"mark a2 used", [&] { return store_->PutNodeCredential(a2_used, a2.enrolment); },
       StatusCode::kOk},
      {"put b1", [&] { return store_->PutNodeCredential(b1, Expected()); }, StatusCode::kOk},
      {"an id another node holds",
       [&] { return store_->PutNodeCredential(b_taking_a2s_id, b1.enrolment); },
       StatusCode::kAlreadyExists},
      {"no node name",
       [&] { return store_->PutNodeCredential(Credential("", "00000000000000c1", 1), Expected()); },
       StatusCode::kInvalidArgument},
      {"no credential id",
       [&] { return store_->PutNodeCredential(Credential("boxc", "", 1), Expected()); },
       StatusCode::kInvalidArgument},
      {"revoke nobody", [&] { return store_->RevokeNode("nobody", 3000); }, StatusCode::kNotFound},
      {"revoke boxa", [&] { return store_->RevokeNode("boxa", 3000); }, StatusCode::kOk},
      {"revoke boxa again", [&] { return store_->RevokeNode("boxa", 3500); }, StatusCode::kOk},
      {"delete a stale boxa", [&] { return store_->DeleteNodeCredential(a2_used.enrolment); },
       StatusCode::kFailedPrecondition},
      {"delete nobody",
       [&] { return store_->DeleteNodeCredential(Credential("nobody", "x", 1).enrolment); },
       StatusCode::kNotFound},
  };
  for (const Row& row : rows) {
    Status st = row.call();
    EXPECT_EQ(st.code(), row.want) << row.what << ": " << st.ToString();
  }

  Reopen();
  NodeCredentialRecord a_now = a2_used;
  a_now.enrolment.revoked_ms = 3000;  // the first revocation time
  EXPECT_EQ(*store_->GetNodeCredential("boxa"), a_now);
  EXPECT_EQ(*store_->FindNodeCredential("00000000000000a2"), a_now);
  EXPECT_EQ(*store_->FindNodeCredential("00000000000000b1"), b1);
  EXPECT_EQ(store_->FindNodeCredential("00000000000000a1").status().code(), StatusCode::kNotFound)
      << "a replaced credential is gone";
  EXPECT_EQ(store_->GetNodeCredential("boxc").status().code(), StatusCode::kNotFound);
  auto list = store_->ListNodeEnrolments();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(*list, (std::vector<api::NodeEnrolment>{a_now.enrolment, b1.enrolment}))
      << "by node name";

  ASSERT_TRUE(store_->DeleteNodeCredential(a_now.enrolment).ok());
  EXPECT_EQ(store_->GetNodeCredential("boxa").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store_->PutNodeCredential(a1, Expected()).ok()) << "the name is free again";
}

TEST_P(StoreTest, StatsCountWrites) {
  const StoreStats before = store_->Stats();
  Insert("alice", "a");
  Insert("alice", "b");
  const StoreStats after = store_->Stats();
  EXPECT_EQ(after.writes, before.writes + 2);
  EXPECT_GE(after.commits, before.commits + 1);
  EXPECT_EQ(after.commit_seconds.counts.size(), after.commit_seconds.upper_bounds.size() + 1);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, StoreTest,
                         ::testing::Values(Backend::kSqlite, Backend::kMemory,
                                           Backend::kFaultyMemory),
                         BackendName);

// ---- FaultyStore's own behaviour ----

TEST(FaultyStoreTest, FailsTheNthWriteOnly) {
  MemoryStore base;
  FaultyStore store(&base);
  store.ArmWriteFault(2, Unavailable("disk on fire"));
  EXPECT_TRUE(store.InsertJob(NewJob{"a", Spec("1"), 1, "submitted"}).ok());
  auto failed = store.InsertJob(NewJob{"a", Spec("2"), 1, "submitted"});
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(store.InsertJob(NewJob{"a", Spec("3"), 1, "submitted"}).ok());
  EXPECT_TRUE(store.ListJobs({}).ok()) << "reads are not affected";
  EXPECT_EQ(base.ListJobs({})->jobs.size(), 2u) << "the failed write never reached the base";
  EXPECT_EQ(store.writes_seen(), 3);
}

TEST(FaultyStoreTest, StickyReadFaultUntilDisarmed) {
  MemoryStore base;
  FaultyStore store(&base);
  store.ArmReadFault(1, Internal("io error"), /*sticky=*/true);
  EXPECT_EQ(store.ListNodes().status().code(), StatusCode::kInternal);
  EXPECT_EQ(store.GetJob(1).status().code(), StatusCode::kInternal);
  EXPECT_TRUE(store.SetAgentJoinToken("t").ok()) << "writes are not affected";
  store.Disarm();
  EXPECT_TRUE(store.ListNodes().ok());
}

}  // namespace
}  // namespace tessera::daemon::store_test
