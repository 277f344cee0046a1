// A lab's cluster file for the simulator (bench/sched/cluster_file.h): what it
// builds, what it refuses (naming the field), and a trace replayed on it.
#include "bench/sched/cluster_file.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "bench/sched/run.h"
#include "bench/sched/sim_planner.h"
#include "bench/sched/trace.h"
#include "tests/common/temp_dir.h"

namespace tessera::scheduler::sim {
namespace {

constexpr char kLab[] = R"(
name: archive-lab
nodes:
  - name: big
    network: {bandwidth: 25Gbit, latency: 20us}
    intra_node: {bandwidth: 300GB}
    gpus:
      - {type: A100-80GB, count: 2, memory: 80GiB, tflops: 19.5, memory_bandwidth: 2TB}
      - {type: RTX4090-24GB, memory: 24GiB, tflops: 82.6, tflops_half: 165}
  - name: old
    count: 3
    gpus:
      - {type: GTX1080-8GB, count: 2, memory: 8GiB, tflops: 8.9}
)";

TEST(ClusterFileTest, BuildsEveryMachineWithItsGpusAndLinks) {
  Result<Cluster> c = ParseClusterFile(kLab, "fallback");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->name, "archive-lab");
  EXPECT_EQ(c->about, "4 machines: 2 A100-80GB, 6 GTX1080-8GB, 1 RTX4090-24GB");
  const auto& nodes = c->snapshot.nodes;
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_EQ(nodes[0].name, "big");
  EXPECT_EQ(nodes[1].name, "old-0");
  EXPECT_EQ(nodes[3].name, "old-2");
  // The big box: its GPUs indexed in file order, its links as written.
  ASSERT_EQ(nodes[0].devices.size(), 3u);
  EXPECT_EQ(nodes[0].devices[0].type, "A100-80GB");
  EXPECT_EQ(nodes[0].devices[1].index, 1);
  EXPECT_EQ(nodes[0].devices[2].type, "RTX4090-24GB");
  EXPECT_EQ(nodes[0].devices[2].index, 2);
  EXPECT_EQ(nodes[0].devices[0].memory_bytes, int64_t{80} << 30);
  EXPECT_DOUBLE_EQ(nodes[0].devices[0].tflops, 19.5);
  EXPECT_DOUBLE_EQ(nodes[0].devices[0].memory_bandwidth_bytes_per_s, 2e12);
  EXPECT_DOUBLE_EQ(nodes[0].devices[2].tflops_half, 165);
  EXPECT_DOUBLE_EQ(nodes[0].network.bandwidth_bytes_per_s, 25e9 / 8);
  EXPECT_DOUBLE_EQ(nodes[0].network.latency_s, 20e-6);
  EXPECT_DOUBLE_EQ(nodes[0].intra_node.bandwidth_bytes_per_s, 300e9);
  EXPECT_DOUBLE_EQ(nodes[0].intra_node.latency_s, Node{}.intra_node.latency_s);
  // The old boxes: the defaults where the file says nothing.
  EXPECT_EQ(nodes[2].devices.size(), 2u);
  EXPECT_DOUBLE_EQ(nodes[2].network.bandwidth_bytes_per_s, Node{}.network.bandwidth_bytes_per_s);
  EXPECT_DOUBLE_EQ(nodes[2].devices[1].tflops_half, 0);
}

TEST(ClusterFileTest, WithoutANameTheClusterIsNamedAfterItsFile) {
  testing::TempDir dir;
  const std::string path = dir.File("my-lab.yaml");
  std::ofstream(path) << "nodes: [{name: a, gpus: [{type: T4, memory: 16GiB, tflops: 8}]}]\n";
  Result<Cluster> c = ReadClusterFile(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->name, "my-lab");
  EXPECT_EQ(c->about, "1 machine: 1 T4");

  Result<Cluster> missing = ReadClusterFile(dir.File("nothing.yaml"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nothing.yaml"), std::string::npos)
      << missing.status().ToString();
}

TEST(ClusterFileTest, BadFilesNameTheirField) {
  const std::string gpu = "{type: T4, memory: 16GiB, tflops: 8}";
  const struct {
    std::string text;
    std::string field;  // empty: the file as a whole
  } cases[] = {
      {"[1, 2]", ""},
      {"nodes: [", ""},
      {"name: lab", "nodes"},
      {"nodes: []", "nodes"},
      {"nodes: [{name: a, gpus: [" + gpu + "]}]\ncolour: red", "colour"},
      {"nodes: [{gpus: [" + gpu + "]}]", "nodes[0].name"},
      {"nodes: [{name: 'a:b', gpus: [" + gpu + "]}]", "nodes[0].name"},
      {"nodes: [{name: a}]", "nodes[0].gpus"},
      {"nodes: [{name: a, gpus: []}]", "nodes[0].gpus"},
      {"nodes: [{name: a, count: 0, gpus: [" + gpu + "]}]", "nodes[0].count"},
      {"nodes: [{name: a, count: two, gpus: [" + gpu + "]}]", "nodes[0].count"},
      {"nodes: [{name: a, rack: 3, gpus: [" + gpu + "]}]", "nodes[0].rack"},
      {"nodes: [{name: a, network: {bandwidth: fast}, gpus: [" + gpu + "]}]",
       "nodes[0].network.bandwidth"},
      {"nodes: [{name: a, network: {latency: -1s}, gpus: [" + gpu + "]}]",
       "nodes[0].network.latency"},
      {"nodes: [{name: a, network: 10Gbit, gpus: [" + gpu + "]}]", "nodes[0].network"},
      {"nodes: [{name: a, gpus: [{memory: 16GiB, tflops: 8}]}]", "nodes[0].gpus[0].type"},
      {"nodes: [{name: a, gpus: [{type: T4, tflops: 8}]}]", "nodes[0].gpus[0].memory"},
      {"nodes: [{name: a, gpus: [{type: T4, memory: 16GiB}]}]", "nodes[0].gpus[0].tflops"},
      {"nodes: [{name: a, gpus: [{type: T4, memory: lots, tflops: 8}]}]",
       "nodes[0].gpus[0].memory"},
      {"nodes: [{name: a, gpus: [{type: T4, memory: 16GiB, tflops: 0}]}]",
       "nodes[0].gpus[0].tflops"},
      {"nodes: [{name: a, gpus: [{type: T4, memory: 16GiB, tflops: 8, count: 2000}]}]",
       "nodes[0].gpus[0].count"},
      {"nodes: [{name: a, gpus: [{type: T4, memory: 16GiB, tflops: 8, nvlink: yes}]}]",
       "nodes[0].gpus[0].nvlink"},
      {"nodes: [{name: a, gpus: [" + gpu + "]}, {name: a, gpus: [" + gpu + "]}]", "nodes"},
      {"nodes: [{name: a, count: 2, gpus: [" + gpu + "]}, {name: a-1, gpus: [" + gpu + "]}]",
       "nodes"},
  };
  for (const auto& c : cases) {
    Result<Cluster> got = ParseClusterFile(c.text, "lab");
    ASSERT_FALSE(got.ok()) << c.text;
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_EQ(got.status().field(), c.field) << c.text << ": " << got.status().ToString();
  }
}

TEST(ClusterFileTest, UsersWeightsAndLimitsAreReadAsTesseradReadsThem) {
  Result<Cluster> c = ParseClusterFile(std::string(kLab) +
                                           "users:\n"
                                           "  alice: {weight: 3, max_devices: 4}\n"
                                           "  '*': {max_pending_jobs: 10}\n",
                                       "lab");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_DOUBLE_EQ(c->users.For("alice").weight, 3);
  EXPECT_EQ(c->users.For("alice").max_devices, 4);
  EXPECT_EQ(c->users.For("bob").max_pending_jobs, 10);
  EXPECT_DOUBLE_EQ(c->users.For("bob").weight, 1);

  Result<Cluster> bad =
      ParseClusterFile(std::string(kLab) + "users: {alice: {weight: 0}}\n", "lab");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "users.alice.weight") << bad.status().ToString();

  // --users: the users: block of any YAML file, tesserad's config among them.
  testing::TempDir dir;
  const std::string config = dir.File("tesserad.yaml");
  std::ofstream(config) << "port: 8080\nstate_dir: /var/lib/tessera\n"
                           "users:\n  bob: {weight: 2, max_running_jobs: 3}\n";
  Result<UserPolicies> users = ReadUsersBlock(config);
  ASSERT_TRUE(users.ok()) << users.status().ToString();
  EXPECT_DOUBLE_EQ(users->For("bob").weight, 2);
  EXPECT_EQ(users->For("bob").max_running_jobs, 3);
  const std::string none = dir.File("none.yaml");
  std::ofstream(none) << "port: 8080\n";
  Result<UserPolicies> missing = ReadUsersBlock(none);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().field(), "users");
  EXPECT_NE(missing.status().message().find("none.yaml"), std::string::npos);
}

TEST(ClusterFileTest, ATraceRunsOnTheLabsOwnCluster) {
  // Two users' jobs on the file's cluster: every job runs under each policy,
  // and the share policy's are planned on the file's machines.
  Result<Cluster> lab = ParseClusterFile(kLab, "lab");
  ASSERT_TRUE(lab.ok()) << lab.status().ToString();
  Trace trace;
  trace.name = "two-users";
  // (submit_s, user, model, global batch, steps, min and max devices)
  trace.jobs = {{0, "alice", "colorize-unet", 16, 3000, 1, 0},
                {60, "bob", "denoiser-dncnn", 32, 2000, 1, 2}};
  SimPlanner planner(lab->snapshot);
  SharedOptions options;
  options.grow_min_speedup = 1.2;
  const sim::Run shared = SimulateShared(trace, *lab, options, &planner);
  const sim::Run rigid = SimulateRigid(trace, *lab, QueueOrdering::kFifo, &planner);
  for (const sim::Run* run : {&shared, &rigid}) {
    ASSERT_EQ(run->jobs.size(), 2u);
    for (const JobOutcome& j : run->jobs) {
      EXPECT_GT(j.end_s, j.start_s) << j.why_not;
      EXPECT_GT(j.alone_s, 0);
      // Its devices are the file's ("big:0", "old-1:1", ...).
      EXPECT_TRUE(j.plan.find("big:") != std::string::npos ||
                  j.plan.find("old-") != std::string::npos)
          << j.plan;
    }
  }
}

}  // namespace
}  // namespace tessera::scheduler::sim
