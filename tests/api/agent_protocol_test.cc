// The heartbeat's JSON shape: a round trip keeps every field, bad input
// names the field.
#include "api/agent_protocol.h"

#include <gtest/gtest.h>

namespace tessera::api {
namespace {

HeartbeatRequest Sample() {
  HeartbeatRequest r;
  r.node = "boxa";
  r.address = "10.0.0.7";
  r.agent_started_ms = 12;
  Device d;
  d.node = "boxa";
  d.index = 0;
  d.name = "A100";
  r.devices = {d, d};
  r.devices[1].index = 1;
  r.links = {{0, 1, "nvlink", 4, "internal"}};
  r.wait_ms = 3000;
  r.cpu_cores = 16;
  return r;
}

TEST(AgentProtocolTest, HeartbeatRoundTripKeepsLinks) {
  auto back = HeartbeatRequestFromJson(ToJson(Sample()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->links, Sample().links);
  EXPECT_EQ(back->devices.size(), 2u);
  EXPECT_EQ(back->wait_ms, 3000);
  EXPECT_EQ(back->cpu_cores, 16);
}

TEST(AgentProtocolTest, HeartbeatWithoutLinksIsAccepted) {
  Json j = ToJson(Sample());
  j.erase("links");
  auto back = HeartbeatRequestFromJson(j);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->links.empty());
}

TEST(AgentProtocolTest, BadLinksNameTheField) {
  struct Case {
    Json links;
    std::string field;
  } cases[] = {
      {Json("nvlink"), "links"},
      {Json::array({{{"a", 0}, {"b", 1}, {"kind", "infiniband"}}}), "links[0].kind"},
      {Json::array({{{"a", 1}, {"b", 1}, {"kind", "pcie"}}}), "links[0].b"},
      {Json::array({{{"a", 0}, {"b", "1"}}}), "links[0].b"},
      {Json::array({{{"a", 0}, {"b", 1}, {"nvlink_count", -2}, {"kind", "nvlink"}}}),
       "links[0].nvlink_count"},
  };
  for (const Case& c : cases) {
    Json j = ToJson(Sample());
    j["links"] = c.links;
    auto r = HeartbeatRequestFromJson(j);
    ASSERT_FALSE(r.ok()) << c.links.dump();
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().field(), c.field) << c.links.dump();
  }
}

TEST(AgentProtocolTest, CpuCoresMustBeACount) {
  for (const Json& bad : {Json(-1), Json(70000), Json("2")}) {
    Json j = ToJson(Sample());
    j["cpu_cores"] = bad;
    auto r = HeartbeatRequestFromJson(j);
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_EQ(r.status().field(), "cpu_cores");
  }
}

TEST(AgentProtocolTest, NodeJsonCarriesLinks) {
  Node n;
  n.name = "boxa";
  n.links = {{0, 2, "system", 0, "system"}};
  n.cpu_cores = 8;
  auto back = NodeFromJson(ToJson(n));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->links, n.links);
  EXPECT_EQ(back->cpu_cores, 8);
}

}  // namespace
}  // namespace tessera::api
