// SnapshotOf: what the planner sees of the nodes tesserad knows.
#include "daemon/planning.h"

#include <gtest/gtest.h>

namespace tessera::daemon {
namespace {

api::Node NodeWith(const std::string& name, int devices, std::vector<api::DeviceLink> links,
                   std::string health = "healthy") {
  api::Node n;
  n.name = name;
  n.address = "10.0.0.1";
  n.health = std::move(health);
  for (int i = 0; i < devices; ++i) {
    api::Device d;
    d.node = name;
    d.index = i;
    d.name = "A100";
    d.type = "cuda";
    d.memory_bytes = int64_t{80} << 30;
    d.measured_tflops = 100;
    n.devices.push_back(d);
  }
  n.links = std::move(links);
  return n;
}

TEST(SnapshotOfTest, DiscoveredLinksOverrideTheNodesPcieDefault) {
  struct Case {
    api::DeviceLink link;
    double bandwidth;  // 0: no override
  } cases[] = {
      {{0, 1, "nvlink", 2, "internal"}, 50e9}, {{0, 1, "nvlink", 12, "internal"}, 300e9},
      {{0, 1, "system", 0, "system"}, 8e9},    {{0, 1, "pcie", 0, "hostbridge"}, 0},
      {{0, 1, "unknown", 0, ""}, 0},
  };
  for (const Case& c : cases) {
    scheduler::ClusterSnapshot s = SnapshotOf({NodeWith("boxa", 2, {c.link})}, {});
    ASSERT_TRUE(s.Validate().ok()) << c.link.kind;
    if (c.bandwidth == 0) {
      EXPECT_TRUE(s.device_links.empty()) << c.link.kind;
      continue;
    }
    ASSERT_EQ(s.device_links.size(), 1u) << c.link.kind;
    EXPECT_EQ(s.device_links[0].a.ToString(), "boxa:0");
    EXPECT_EQ(s.device_links[0].b.ToString(), "boxa:1");
    EXPECT_DOUBLE_EQ(s.device_links[0].link.bandwidth_bytes_per_s, c.bandwidth) << c.link.kind;
  }
}

TEST(SnapshotOfTest, EmulatedDevicesUseCpuTimesAtTheirSpeedCappedAtOne) {
  api::Node a = NodeWith("boxa", 2, {});
  a.devices[0].emulated = true;
  a.devices[0].relative_speed = 0.25;
  a.devices[1].emulated = true;
  a.devices[1].relative_speed = 3;
  auto s = SnapshotOf({a}, {});
  ASSERT_EQ(s.nodes.size(), 1u);
  EXPECT_EQ(s.nodes[0].devices[0].measured_as, "cpu");
  EXPECT_DOUBLE_EQ(s.nodes[0].devices[0].relative_speed, 0.25);
  EXPECT_DOUBLE_EQ(s.nodes[0].devices[1].relative_speed, 1.0) << "the CPU cannot go faster";
}

struct CapacityCase {
  const char* name;
  std::vector<std::pair<std::string, std::vector<double>>> nodes;  // address, speeds
  int64_t cores;
  size_t warnings;
};

TEST(EmulationCapacityWarningsTest, OneLinePerHostWhoseSpeedsExceedItsCores) {
  const CapacityCase cases[] = {
      {"fits", {{"10.0.0.1", {0.5, 0.5}}, {"10.0.0.1", {0.4}}}, 2, 0},
      {"three_agents_over",
       {{"10.0.0.1", {1, 1}}, {"10.0.0.1", {0.8}}, {"10.0.0.1", {0.35}}},
       2,
       1},
      {"two_hosts_each_fit", {{"10.0.0.1", {1, 1}}, {"10.0.0.2", {1, 1}}}, 2, 0},
      {"unknown_cores", {{"10.0.0.1", {5}}}, 0, 0},
  };
  for (const CapacityCase& c : cases) {
    std::vector<api::Node> nodes;
    for (size_t i = 0; i < c.nodes.size(); ++i) {
      api::Node n =
          NodeWith("box" + std::to_string(i), static_cast<int>(c.nodes[i].second.size()), {});
      n.address = c.nodes[i].first;
      n.cpu_cores = c.cores;
      for (size_t j = 0; j < n.devices.size(); ++j) {
        n.devices[j].emulated = true;
        n.devices[j].relative_speed = c.nodes[i].second[j];
      }
      nodes.push_back(n);
    }
    auto w = EmulationCapacityWarnings(nodes);
    ASSERT_EQ(w.size(), c.warnings) << c.name;
    if (!w.empty()) {
      EXPECT_NE(w[0].find("box0, box1, box2"), std::string::npos) << w[0];
      EXPECT_NE(w[0].find("adding up to 3.15 on 2 cores"), std::string::npos) << w[0];
    }
  }
}

TEST(SnapshotOfTest, ReportedNetworkLinkReplacesTheDefault) {
  const scheduler::Link fallback = scheduler::Node{}.network;
  struct Case {
    const char* name;
    double bandwidth;  // reported; 0: unknown
    double latency;
    scheduler::Link want;
  } cases[] = {
      {"declared_20mbit_5ms", 2.5e6, 0.005, {2.5e6, 0.005}},
      {"declared_zero_latency", 125e6, 0, {125e6, 0}},
      {"unknown_keeps_default", 0, 0, fallback},
  };
  for (const Case& c : cases) {
    api::Node n = NodeWith("boxa", 1, {});
    n.network_bandwidth_bytes_per_s = c.bandwidth;
    n.network_latency_s = c.latency;
    scheduler::ClusterSnapshot s = SnapshotOf({n, NodeWith("boxb", 1, {})}, {});
    ASSERT_TRUE(s.Validate().ok()) << c.name;
    ASSERT_EQ(s.nodes.size(), 2u);
    EXPECT_DOUBLE_EQ(s.nodes[0].network.bandwidth_bytes_per_s, c.want.bandwidth_bytes_per_s)
        << c.name;
    EXPECT_DOUBLE_EQ(s.nodes[0].network.latency_s, c.want.latency_s) << c.name;
    EXPECT_DOUBLE_EQ(s.nodes[1].network.bandwidth_bytes_per_s, fallback.bandwidth_bytes_per_s)
        << "a node that reports nothing keeps the default";
  }
}

TEST(SnapshotOfTest, NodesThatAreNotHealthyAreLeftOutWithTheirLinks) {
  auto s =
      SnapshotOf({NodeWith("boxa", 2, {{0, 1, "nvlink", 4, ""}}, "dead"), NodeWith("boxb", 1, {})},
                 {"boxb:0"});
  ASSERT_EQ(s.nodes.size(), 1u);
  EXPECT_EQ(s.nodes[0].name, "boxb");
  EXPECT_TRUE(s.device_links.empty());
  EXPECT_TRUE(s.nodes[0].devices[0].busy);
}

}  // namespace
}  // namespace tessera::daemon
