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

TEST(AgentProtocolTest, DeviceThroughputFiguresRoundTrip) {
  Device d;
  d.name = "A100";
  d.measured_tflops = 19.5;
  d.measured_tflops_half = 312;
  d.mem_bandwidth_gbps = 1555;
  auto back = DeviceFromJson(ToJson(d));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_DOUBLE_EQ(back->measured_tflops, 19.5);
  EXPECT_DOUBLE_EQ(back->measured_tflops_half, 312);
  EXPECT_DOUBLE_EQ(back->mem_bandwidth_gbps, 1555);
  // An agent from before 16-bit was measured sends no such key: 0, not an error.
  Json old = ToJson(d);
  old.erase("measured_tflops_half");
  auto older = DeviceFromJson(old);
  ASSERT_TRUE(older.ok()) << older.status().ToString();
  EXPECT_DOUBLE_EQ(older->measured_tflops_half, 0);
  old["measured_tflops_half"] = "fast";
  auto bad = DeviceFromJson(old);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "measured_tflops_half");
}

TEST(AgentProtocolTest, AMeasureErrorTravelsWithTheDevice) {
  Device d;
  d.name = "A100";
  d.measure_error = "benchmark of cuda:0 failed: deadline_exceeded: killed";
  auto back = DeviceFromJson(ToJson(d));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->measure_error, d.measure_error);
  Json old = ToJson(d);
  old.erase("measure_error");  // an agent from before the field
  auto older = DeviceFromJson(old);
  ASSERT_TRUE(older.ok()) << older.status().ToString();
  EXPECT_EQ(older->measure_error, "");
}

// A GPU's measured layer profiles travel with it; malformed ones name the field.
TEST(AgentProtocolTest, MeasuredProfilesTravelWithTheDeviceAndAreBounded) {
  Device d;
  d.name = "H100";
  d.profiles["colorize-unet"] = Json{{"device", "cuda:0"}, {"layers", Json::array()}};
  auto back = DeviceFromJson(ToJson(d));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->profiles, d.profiles);
  EXPECT_FALSE(ToJson(Device{}).contains("profiles")) << "absent when empty";

  struct Case {
    const char* name;
    Json profiles;
    std::string field;
  };
  Json many = Json::object();
  for (size_t i = 0; i <= kMaxDeviceProfiles; ++i) many["m" + std::to_string(i)] = Json::object();
  const Case cases[] = {
      {"not an object", Json::array(), "profiles"},
      {"a profile not an object", Json{{"colorize-unet", 3}}, "profiles.colorize-unet"},
      {"too many", many, "profiles"},
      {"too large", Json{{"big", Json{{"pad", std::string(kMaxDeviceProfileBytes, 'x')}}}},
       "profiles.big"},
      {"empty model name", Json{{"", Json::object()}}, "profiles"},
  };
  for (const Case& c : cases) {
    Json j = ToJson(d);
    j["profiles"] = c.profiles;
    auto bad = DeviceFromJson(j);
    ASSERT_FALSE(bad.ok()) << c.name;
    EXPECT_EQ(bad.status().field(), c.field) << c.name << ": " << bad.status().ToString();
  }
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

TEST(AgentProtocolTest, WorkersCarryTheirNewProgressLines) {
  HeartbeatRequest r = Sample();
  WorkerStatus w;
  w.key = {7, 2, 1};
  w.progress = Json{{"step", 12}};
  w.progress_lines = {Json{{"step", 11}}, Json{{"step", 12}}};
  r.workers = {w};
  auto back = HeartbeatRequestFromJson(ToJson(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->workers.at(0).progress_lines, w.progress_lines);
  w.progress_lines.clear();
  r.workers = {w};
  EXPECT_FALSE(ToJson(r)["workers"][0].contains("progress_lines")) << "left out when empty";

  struct Case {
    Json lines;
    bool ok;
  } cases[] = {
      {Json(nullptr), true},
      {Json::array(), true},
      {Json("step 3"), false},
      {Json::array({Json{{"step", 1}}, Json(3)}), false},
      {Json(std::vector<Json>(kMaxProgressLinesPerWorker + 1, Json{{"step", 1}})), false},
  };
  for (const Case& c : cases) {
    Json j = ToJson(r);
    j["workers"][0]["progress_lines"] = c.lines;
    auto parsed = HeartbeatRequestFromJson(j);
    EXPECT_EQ(parsed.ok(), c.ok) << c.lines.dump().substr(0, 80);
    if (!c.ok) {
      EXPECT_EQ(parsed.status().field(), "workers[0].progress_lines");
    }
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

TEST(AgentProtocolTest, HeartbeatCarriesTheDeclaredNetworkLink) {
  HeartbeatRequest r = Sample();
  r.network.bandwidth_bytes_per_s = 2.5e6;
  r.network.latency_s = 0.005;
  Json j = ToJson(r);
  EXPECT_DOUBLE_EQ(j["network_bandwidth_bytes_per_s"].get<double>(), 2.5e6);
  auto back = HeartbeatRequestFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_DOUBLE_EQ(back->network.bandwidth_bytes_per_s, 2.5e6);
  EXPECT_DOUBLE_EQ(back->network.latency_s, 0.005);

  // Unknown (the default) is left out and read back as 0.
  Json unknown = ToJson(Sample());
  EXPECT_FALSE(unknown.contains("network_bandwidth_bytes_per_s"));
  back = HeartbeatRequestFromJson(unknown);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->network.bandwidth_bytes_per_s, 0);
  EXPECT_EQ(back->network.latency_s, 0);
}

// The declared network link and the measured loopback Gloo link are read alike.
TEST(AgentProtocolTest, NetworkAndGlooLinkFields) {
  struct Case {
    const char* name;
    Json bandwidth;  // null: absent
    Json latency;
    std::string field;  // "" : accepted; else the field's name after the prefix
    double want_bandwidth;
    double want_latency;
  } cases[] = {
      {"integer_bandwidth", Json(125000000), Json(0.00005), "", 125e6, 50e-6},
      {"zero_latency", Json(1e9), Json(0), "", 1e9, 0},
      {"zero_bandwidth_is_unknown", Json(0), Json(0.002), "", 0, 0},
      {"latency_without_bandwidth_is_ignored", Json(), Json(0.002), "", 0, 0},
      {"negative_bandwidth", Json(-1.0), Json(0.001), "_bandwidth_bytes_per_s", 0, 0},
      {"text_bandwidth", Json("100Mbit"), Json(0.001), "_bandwidth_bytes_per_s", 0, 0},
      {"negative_latency", Json(1e9), Json(-0.001), "_latency_s", 0, 0},
      {"text_latency", Json(1e9), Json("2ms"), "_latency_s", 0, 0},
  };
  struct Prefix {
    std::string name;
    NodeLink HeartbeatRequest::*link;
  } prefixes[] = {
      {"network", &HeartbeatRequest::network},
      {"gloo", &HeartbeatRequest::gloo_link},
  };
  for (const Prefix& p : prefixes) {
    for (const Case& c : cases) {
      SCOPED_TRACE(p.name + " " + c.name);
      Json j = ToJson(Sample());
      if (!c.bandwidth.is_null()) j[p.name + "_bandwidth_bytes_per_s"] = c.bandwidth;
      if (!c.latency.is_null()) j[p.name + "_latency_s"] = c.latency;
      auto r = HeartbeatRequestFromJson(j);
      if (c.field.empty()) {
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        EXPECT_DOUBLE_EQ(((*r).*p.link).bandwidth_bytes_per_s, c.want_bandwidth);
        EXPECT_DOUBLE_EQ(((*r).*p.link).latency_s, c.want_latency);
      } else {
        ASSERT_FALSE(r.ok());
        EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
        EXPECT_EQ(r.status().field(), p.name + c.field);
      }
    }
  }
}

TEST(AgentProtocolTest, GlooLinkRoundTripsWithItsCpuPerHop) {
  HeartbeatRequest r = Sample();
  const NodeLink measured{1e9, 5e-4, 3e-4};
  r.gloo_link = measured;
  auto back = HeartbeatRequestFromJson(ToJson(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->gloo_link, measured);
  Json bad = ToJson(r);
  bad["gloo_cpu_per_hop_s"] = -1.0;
  auto refused = HeartbeatRequestFromJson(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().field(), "gloo_cpu_per_hop_s");
  EXPECT_FALSE(ToJson(Sample()).contains("gloo_bandwidth_bytes_per_s")) << "not measured: absent";

  Node n;
  n.name = "boxa";
  EXPECT_TRUE(ToJson(n)["gloo_link"].is_null());
  n.gloo_link = measured;
  auto node = NodeFromJson(ToJson(n));
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node->gloo_link, measured);
}

TEST(AgentProtocolTest, NodeJsonShowsTheNetworkLinkWhenKnown) {
  Node n;
  n.name = "boxa";
  EXPECT_TRUE(ToJson(n)["network"].is_null());
  n.network.bandwidth_bytes_per_s = 2.5e6;
  n.network.latency_s = 0.005;
  Json j = ToJson(n);
  EXPECT_DOUBLE_EQ(j["network"]["bandwidth_bytes_per_s"].get<double>(), 2.5e6);
  EXPECT_DOUBLE_EQ(j["network"]["latency_s"].get<double>(), 0.005);
  auto back = NodeFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_DOUBLE_EQ(back->network.bandwidth_bytes_per_s, 2.5e6);
  EXPECT_DOUBLE_EQ(back->network.latency_s, 0.005);
  j["network"]["latency_s"] = "5ms";
  EXPECT_EQ(NodeFromJson(j).status().field(), "network.latency_s");
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

TEST(AgentProtocolTest, ProgressLinesBecomeHistoryPoints) {
  struct Case {
    const char* line;
    bool point;
  } cases[] = {
      {R"({"step": 7})", true},
      {R"({"step": 7.0, "loss": 0.5})", true},  // an integral float is a step
      {R"({"step": 7.5})", false},
      {R"({"step": -1})", false},
      {R"({"step": "7"})", false},
      {R"({"loss": 0.5})", false},
      {R"([1, 2])", false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(MetricPointFromProgressLine(Json::parse(c.line), 1, 0, 5).has_value(), c.point)
        << c.line;
  }
  auto p = MetricPointFromProgressLine(
      Json::parse(R"({"step": 12, "loss": 0.25, "samples_per_s": 80, "compute_s": 0.3,
                      "comm_s": "slow", "bubble_s": 0.01, "peak_memory_bytes": 2048,
                      "predicted_peak_memory_bytes": 4096.0, "ts_ms": 777, "rank": 9,
                      "d_loss": 1.5})"),
      3, 2, 5);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->step, 12);
  EXPECT_EQ(p->attempt, 3);
  EXPECT_EQ(p->rank, 2) << "the worker key's rank, not the line's";
  EXPECT_EQ(p->ts_ms, 777);
  EXPECT_EQ(p->loss, 0.25);
  EXPECT_EQ(p->samples_per_s, 80.0);
  EXPECT_FALSE(p->comm_s.has_value()) << "not a number: left out";
  EXPECT_EQ(p->peak_memory_bytes, 2048);
  EXPECT_EQ(p->predicted_peak_memory_bytes, 4096);
  EXPECT_EQ(MetricPointFromProgressLine(Json{{"step", 1}}, 1, 0, 5)->ts_ms, 5)
      << "no ts_ms: the time it was received";
  EXPECT_EQ(MetricPointFromJson(ToJson(*p)).value(), *p);
}

TEST(AgentProtocolTest, CompactAnswersSendEachAttemptsPlanOnce) {
  HeartbeatResponse r;
  Json plan = {{"layout", "data"}, {"replicas", Json::array({1, 2, 3})}};
  for (int64_t rank : {0, 1, 2}) {
    WorkerLaunch l;
    l.key = {7, 2, rank};
    l.argv = {"/bin/worker"};
    l.plan = plan;
    r.desired.push_back(l);
  }
  WorkerLaunch other;
  other.key = {8, 1, 0};
  other.argv = {"/bin/worker"};
  other.plan = {{"layout", "pipeline"}};
  r.desired.push_back(other);

  Json compact = ToJson(r, /*compact=*/true);
  ASSERT_EQ(compact["plans"].size(), 2u);
  EXPECT_EQ(compact["plans"]["7/2"], plan);
  for (const Json& l : compact["desired"]) {
    EXPECT_FALSE(l.contains("plan"));
    EXPECT_TRUE(l.contains("plan_ref"));
  }
  EXPECT_LT(compact.dump().size(), ToJson(r).dump().size());
  // Both forms read back to the same launches.
  for (const Json& j : {compact, ToJson(r)}) {
    auto back = HeartbeatResponseFromJson(j);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ASSERT_EQ(back->desired.size(), 4u);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(back->desired[i].plan, r.desired[i].plan);
  }
  Json dangling = compact;
  dangling["plans"].erase("8/1");
  EXPECT_EQ(HeartbeatResponseFromJson(dangling).status().field(), "desired[3].plan_ref");
}

// A re-formed rank's place travels with its launch in both forms; a
// malformed one names the field.
TEST(AgentProtocolTest, AReformOrderTravelsWithItsLaunch) {
  HeartbeatResponse r;
  WorkerLaunch l;
  l.key = {7, 1, 2};
  l.argv = {"/bin/worker"};
  l.plan = {{"layout", "data"}};
  l.reform = {{"generation", 1}, {"env", {{"RANK", "0"}}}, {"plan", {{"layout", "data"}}}};
  r.desired.push_back(l);
  WorkerLaunch plain = l;
  plain.key.rank = 3;
  plain.reform = nullptr;
  r.desired.push_back(plain);
  for (bool compact : {false, true}) {
    auto back = HeartbeatResponseFromJson(ToJson(r, compact));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->desired[0].reform, l.reform);
    EXPECT_TRUE(back->desired[1].reform.is_null());
  }
  Json bad = ToJson(r);
  bad["desired"][0]["reform"] = {{"generation", "one"}};
  EXPECT_EQ(HeartbeatResponseFromJson(bad).status().field(), "desired[0].reform");
}

TEST(AgentProtocolTest, OnlyAgentsThatSayTheyReadCompactAnswersGetThem) {
  HeartbeatRequest req;
  req.node = "n";
  Json j = ToJson(req);
  EXPECT_EQ(j["compact_launches"], true);
  EXPECT_TRUE(HeartbeatRequestFromJson(j)->compact_launches);
  j.erase("compact_launches");  // an agent from before compact answers
  EXPECT_FALSE(HeartbeatRequestFromJson(j)->compact_launches);
  j["compact_launches"] = "yes";
  EXPECT_EQ(HeartbeatRequestFromJson(j).status().field(), "compact_launches");
}

}  // namespace
}  // namespace tessera::api
