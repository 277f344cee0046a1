// Slurm nodes as tesserad nodes: GRES parsing, up/down, devices per GPU type.
#include "slurm/slurm_nodes.h"

#include <gtest/gtest.h>

namespace tessera::slurm {
namespace {

TEST(SlurmNodesTest, ParsesGpuGres) {
  struct Case {
    std::string gres;
    std::vector<GpuGres> gpus;
  };
  const Case cases[] = {
      {"", {}},
      {"(null)", {}},
      {"gpu:a100:2", {{"a100", 2}}},
      {"gpu:a100:2(S:0-1)", {{"a100", 2}}},
      {"gpu:a100:2(S:0,1),gpu:t4:1", {{"a100", 2}, {"t4", 1}}},
      {"gpu:4", {{"", 4}}},
      {"gpu", {{"", 1}}},
      {"mps:100,gpu:t4:1,shard:8", {{"t4", 1}}},
      {"gpu:t4:0", {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.gres);
    auto gpus = ParseGpuGres(c.gres);
    ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
    EXPECT_EQ(*gpus, c.gpus);
  }
  for (const std::string bad : {"gpu:a100:two", "gpu:a100:-1", "gpu:x"}) {
    EXPECT_FALSE(ParseGpuGres(bad).ok()) << bad;
  }
}

TEST(SlurmNodesTest, UpFollowsSlurmState) {
  struct Case {
    std::string state;
    std::vector<std::string> flags;
    bool up;
  };
  const Case cases[] = {
      {"idle", {}, true},
      {"mixed", {}, true},
      {"allocated", {}, true},
      {"completing", {}, true},
      {"down", {}, false},
      {"unknown", {}, false},
      {"future", {}, false},
      {"idle", {"DRAIN"}, false},
      {"allocated", {"DRAIN"}, false},
      {"idle", {"NOT_RESPONDING"}, false},
      {"idle", {"POWERED_DOWN"}, false},
      {"mixed", {"RESERVED"}, true},
  };
  for (const Case& c : cases) {
    SlurmNode n;
    n.state = c.state;
    n.state_flags = c.flags;
    EXPECT_EQ(SlurmNodeUp(n), c.up) << c.state << " " << testing::PrintToString(c.flags);
  }
}

TEST(SlurmNodesTest, PartitionFilter) {
  SlurmNode n;
  n.partitions = {"gpu", "debug"};
  EXPECT_TRUE(InPartition(n, "gpu"));
  EXPECT_TRUE(InPartition(n, ""));
  EXPECT_FALSE(InPartition(n, "cpu"));
}

TEST(SlurmNodesTest, DevicesPerGpuWithTheTypesFigures) {
  SlurmNode n;
  n.name = "fa";
  n.address = "10.0.0.5";
  n.cpus = 32;
  const std::map<std::string, GpuType> types = {
      {"a100", {19.5, 1.0, int64_t{80} << 30, false}},
      {"t4", {0, 0.25, int64_t{1} << 30, true}},
  };
  std::vector<std::string> unknown;
  api::HeartbeatRequest hb =
      HeartbeatFor(n, {{"a100", 2}, {"v100", 1}, {"t4", 1}}, types, &unknown);
  EXPECT_EQ(hb.node, "fa");
  EXPECT_EQ(hb.address, "10.0.0.5");
  EXPECT_EQ(hb.cpu_cores, 32);
  ASSERT_EQ(hb.devices.size(), 3u);  // the v100 is not configured
  EXPECT_EQ(unknown, std::vector<std::string>{"v100"});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(hb.devices[i].index, i);
  EXPECT_EQ(hb.devices[0].name, "a100");
  EXPECT_EQ(hb.devices[0].type, "cuda");
  EXPECT_FALSE(hb.devices[0].emulated);
  EXPECT_DOUBLE_EQ(hb.devices[0].measured_tflops, 19.5);
  EXPECT_EQ(hb.devices[1].memory_bytes, int64_t{80} << 30);
  EXPECT_EQ(hb.devices[2].name, "t4");
  EXPECT_TRUE(hb.devices[2].emulated);
  EXPECT_DOUBLE_EQ(hb.devices[2].relative_speed, 0.25);
  EXPECT_EQ(hb.devices[2].memory_bytes, int64_t{1} << 30);
  EXPECT_TRUE(hb.workers.empty());
}

}  // namespace
}  // namespace tessera::slurm
