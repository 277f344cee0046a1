// infer_growth: how new ranks join a running infer attempt. Pure; table tests
// over launches built as the controller builds them (BuildAttemptLaunch).
#include "daemon/controller/infer_growth.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "scheduler/plan_json.h"
#include "worker/runtime/dist_env.h"

namespace tessera::daemon {
namespace {

api::Job InferJob() {
  api::Job job;
  job.id = 7;
  job.owner = "alice";
  job.spec.name = "restore";
  job.spec.kind = api::JobKind::kInfer;
  job.spec.entrypoint = "cmd:restore";
  job.spec.dataset = "/srv/scans";
  job.spec.output = "/srv/out";
  job.spec.global_batch = 12;
  job.spec.max_attempts = 3;
  job.spec.env = {{"MY_FLAG", "on"}};
  return job;
}

// A data plan with one single-stage replica per device ("node:index").
scheduler::Plan DataPlan(const std::vector<std::string>& devices) {
  scheduler::Plan p;
  p.layout = scheduler::Layout::kData;
  p.dp = static_cast<int>(devices.size());
  for (const std::string& d : devices) {
    scheduler::Stage s;
    s.devices = {{d.substr(0, d.find(':')), std::stoi(d.substr(d.find(':') + 1))}};
    s.layer_begin = 0;
    s.layer_end = 1;
    scheduler::Replica r;
    r.batch = 12 / static_cast<int64_t>(devices.size());
    r.stages = {s};
    p.replicas.push_back(r);
  }
  return p;
}

// The launch of attempt 2 over `devices`, as a placement (or, for the wider
// plan, growth) builds it; `taken` ports at the master's address are held.
AttemptLaunch LaunchOn(const std::vector<std::string>& devices, const MasterPortsInUse& taken = {},
                       const scheduler::Plan* plan = nullptr) {
  LaunchOptions options;
  options.worker_binary = "/usr/bin/tessera-worker";
  options.checkpoint_root = "/ckpt";
  options.run_as = {{"alice", "alice-lab"}};
  const scheduler::Plan p = plan != nullptr ? *plan : DataPlan(devices);
  auto launch = BuildAttemptLaunch(
      InferJob(), /*attempt=*/2, p, scheduler::ToJson(p), {"cmd:restore", "/opt/lab/restore.py"},
      {{"a", "10.0.0.1"}, {"b", "10.0.0.2"}, {"c", "10.0.0.3"}}, options, taken);
  EXPECT_TRUE(launch.ok()) << launch.status().ToString();
  return launch.ok() ? *launch : AttemptLaunch{};
}

std::string Env(const RankLaunch& r, const std::string& name) {
  auto it = r.launch.env.find(name);
  return it == r.launch.env.end() ? "<unset>" : it->second;
}

struct JoinedRow {
  int64_t rank;
  std::string device;
  std::string local_rank;
  std::string local_world_size;
};

struct JoinCase {
  const char* name;
  std::vector<std::string> running;  // the attempt's ranks, by rank
  std::set<int64_t> dropped;
  std::vector<std::string> wider;  // the wider plan's devices
  std::vector<std::string> join;
  std::string world_size;  // every joined rank's
  std::vector<JoinedRow> joined;
};

TEST(JoinInferRanksTest, NewRanksJoinAfterTheExistingOnesWithTheirPlaceInTheAttempt) {
  const JoinCase cases[] = {
      {"one_free_device", {"a:0"}, {}, {"a:0", "b:0"}, {"b:0"}, "2", {{1, "b:0", "0", "1"}}},
      // Dropped ranks keep their numbers: a number is never used twice.
      {"after_ranks_were_dropped",
       {"a:0", "b:0", "c:0"},
       {1, 2},
       {"a:0", "b:0"},
       {"b:0"},
       "4",
       {{3, "b:0", "0", "1"}}},
      {"two_at_once",
       {"a:0"},
       {},
       {"a:0", "b:0", "c:0"},
       {"c:0", "b:0"},
       "3",
       {{1, "c:0", "0", "1"}, {2, "b:0", "0", "1"}}},
      // Beside a running rank of its node: cuda:LOCAL_RANK is its own GPU.
      {"beside_a_running_rank", {"a:0"}, {}, {"a:0", "a:1"}, {"a:1"}, "2", {{1, "a:1", "1", "2"}}},
      // a:1's rank was dropped: the new rank on it sorts between a:0 (local 0)
      // and a:2 (local 2), so it is local rank 1.
      {"into_a_gap_on_its_node",
       {"a:0", "a:1", "a:2"},
       {1},
       {"a:0", "a:1", "a:2"},
       {"a:1"},
       "4",
       {{3, "a:1", "1", "3"}}},
      // Only a:2 runs (local 2): the new rank on a:0 sorts first.
      {"before_the_running_rank_of_its_node",
       {"a:0", "a:1", "a:2"},
       {0, 1},
       {"a:0", "a:2"},
       {"a:0"},
       "4",
       {{3, "a:0", "0", "2"}}},
  };
  for (const JoinCase& c : cases) {
    SCOPED_TRACE(c.name);
    const AttemptLaunch old = LaunchOn(c.running);
    ASSERT_EQ(old.ranks.size(), c.running.size());
    // The wider launch picked another rendezvous port: the old one is held.
    MasterPortsInUse taken;
    AddMasterPort(old, &taken);
    const AttemptLaunch fresh = LaunchOn(c.wider, taken);
    ASSERT_NE(Env(fresh.ranks[0], "MASTER_PORT"), Env(old.ranks[0], "MASTER_PORT"));

    auto grown = JoinInferRanks(old, c.dropped, fresh, c.join);
    ASSERT_TRUE(grown.ok()) << grown.status().ToString();
    const AttemptLaunch& g = grown->launch;
    ASSERT_EQ(g.ranks.size(), old.ranks.size() + c.joined.size());
    std::vector<int64_t> numbers;
    for (const JoinedRow& row : c.joined) numbers.push_back(row.rank);
    EXPECT_EQ(grown->joined, numbers);
    // The running ranks are untouched but for the plan they are handed.
    for (size_t r = 0; r < old.ranks.size(); ++r) {
      EXPECT_EQ(g.ranks[r].launch.key, old.ranks[r].launch.key);
      EXPECT_EQ(g.ranks[r].launch.env, old.ranks[r].launch.env);
      EXPECT_EQ(g.ranks[r].launch.argv, old.ranks[r].launch.argv);
    }
    ASSERT_EQ(g.rank_plan["replicas"].size(), g.ranks.size());
    ASSERT_EQ(g.plan["replicas"].size(), g.ranks.size());
    EXPECT_EQ(g.plan["dp"], g.ranks.size());
    for (const JoinedRow& row : c.joined) {
      SCOPED_TRACE("rank " + std::to_string(row.rank));
      const RankLaunch& r = g.ranks.at(static_cast<size_t>(row.rank));
      EXPECT_EQ(r.node + ":" + std::to_string(r.device_index), row.device);
      EXPECT_EQ(r.launch.key, (api::WorkerKey{7, 2, row.rank}));
      EXPECT_EQ(r.launch.device_indices, std::vector<int64_t>{r.device_index});
      // Launched as a fresh launch launches the rank on its device...
      EXPECT_EQ(r.launch.argv, fresh.ranks[0].launch.argv);
      EXPECT_EQ(r.launch.run_as, "alice-lab");
      EXPECT_EQ(Env(r, "MY_FLAG"), "on");
      EXPECT_EQ(Env(r, "TESSERA_JOB_ID"), "7");
      EXPECT_EQ(Env(r, "TESSERA_ATTEMPT"), "2");
      EXPECT_EQ(Env(r, "TESSERA_INFER_DATASET"), "/srv/scans");
      EXPECT_EQ(Env(r, "TESSERA_INFER_OUTPUT"), "/srv/out");
      // ... with its place in the attempt.
      EXPECT_EQ(Env(r, "RANK"), std::to_string(row.rank));
      EXPECT_EQ(Env(r, "ROLE_RANK"), std::to_string(row.rank));
      EXPECT_EQ(Env(r, "WORLD_SIZE"), c.world_size);
      EXPECT_EQ(Env(r, "ROLE_WORLD_SIZE"), c.world_size);
      EXPECT_EQ(Env(r, "LOCAL_RANK"), row.local_rank);
      EXPECT_EQ(Env(r, "LOCAL_WORLD_SIZE"), row.local_world_size);
      EXPECT_EQ(Env(r, "MASTER_ADDR"), Env(old.ranks[0], "MASTER_ADDR"));
      EXPECT_EQ(Env(r, "MASTER_PORT"), Env(old.ranks[0], "MASTER_PORT"));
      EXPECT_TRUE(r.launch.reform.is_null());
      // Replica k is rank k's, in both plans.
      const api::Json& stage = g.rank_plan["replicas"][static_cast<size_t>(row.rank)]["stages"][0];
      EXPECT_EQ(stage["rank"], row.rank);
      EXPECT_EQ(stage["device"], row.device);
      EXPECT_EQ(g.plan["replicas"][static_cast<size_t>(row.rank)]["stages"][0]["devices"][0],
                row.device);
      // The worker accepts its environment, and every rank of the plan it
      // reads lies within its world.
      auto env = worker::ReadDistEnv([&](const std::string& name) -> std::optional<std::string> {
        auto it = r.launch.env.find(name);
        if (it == r.launch.env.end()) return std::nullopt;
        return it->second;
      });
      ASSERT_TRUE(env.ok()) << env.status().ToString();
      EXPECT_EQ(env->rank, row.rank);
      for (const api::Json& replica : r.launch.plan["replicas"]) {
        EXPECT_LT(replica["stages"][0]["rank"].get<int64_t>(), env->world_size);
      }
    }
    for (const RankLaunch& r : g.ranks) EXPECT_EQ(r.launch.plan, g.rank_plan);
    // A stored attempt reads back as it was written.
    auto stored = AttemptLaunchFromJson(ToJson(g));
    ASSERT_TRUE(stored.ok()) << stored.status().ToString();
    EXPECT_EQ(ToJson(*stored), ToJson(g));
  }
}

TEST(JoinInferRanksTest, RefusesWhatCannotJoin) {
  const AttemptLaunch old = LaunchOn({"a:0", "b:0"});
  const AttemptLaunch fresh = LaunchOn({"a:0", "b:0", "c:0"});
  AttemptLaunch train = old;
  train.infer = false;
  AttemptLaunch later = fresh;
  later.attempt = 3;
  scheduler::Plan pipeline = DataPlan({"a:0", "c:0"});
  pipeline.replicas[0].stages.push_back(pipeline.replicas[1].stages[0]);
  pipeline.replicas.pop_back();
  const AttemptLaunch staged = LaunchOn({}, {}, &pipeline);
  struct Case {
    const char* name;
    const AttemptLaunch* old;
    std::set<int64_t> dropped;
    const AttemptLaunch* fresh;
    std::vector<std::string> join;
    std::string field;
  };
  const Case cases[] = {
      {"not_in_the_wider_plan", &old, {}, &fresh, {"d:0"}, "devices"},
      {"held_by_a_live_rank", &old, {}, &fresh, {"b:0"}, "devices"},
      {"named_twice", &old, {}, &fresh, {"c:0", "c:0"}, "devices"},
      {"another_attempt", &old, {}, &later, {"c:0"}, "attempt"},
      {"not_infer", &train, {}, &fresh, {"c:0"}, "infer"},
      {"a_pipeline_stage", &old, {}, &staged, {"c:0"}, "plan"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto grown = JoinInferRanks(*c.old, c.dropped, *c.fresh, c.join);
    ASSERT_FALSE(grown.ok());
    EXPECT_EQ(grown.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(grown.status().field(), c.field) << grown.status().ToString();
  }
  // The device of a dropped rank may take a new one.
  auto again = JoinInferRanks(old, {1}, fresh, {"b:0"});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->joined, std::vector<int64_t>{2});
}

}  // namespace
}  // namespace tessera::daemon
