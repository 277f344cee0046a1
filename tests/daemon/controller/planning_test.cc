// SnapshotOf: what the planner sees of the nodes tesserad knows.
#include "daemon/controller/planning.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "daemon/controller/profile_cache.h"
#include "daemon/store/store.h"
#include "scheduler/profile_json.h"

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

TEST(SnapshotOfTest, MeasuredThroughputReachesThePlanner) {
  api::Node a = NodeWith("boxa", 2, {});
  a.devices[0].measured_tflops_half = 312;
  a.devices[0].mem_bandwidth_gbps = 1555;
  auto s = SnapshotOf({a}, {});
  ASSERT_EQ(s.nodes.size(), 1u);
  const scheduler::Device& d0 = s.nodes[0].devices[0];
  EXPECT_DOUBLE_EQ(d0.tflops, 100);
  EXPECT_DOUBLE_EQ(d0.tflops_half, 312);
  EXPECT_DOUBLE_EQ(d0.memory_bandwidth_bytes_per_s, 1555e9);
  EXPECT_DOUBLE_EQ(s.nodes[0].devices[1].tflops_half, 0) << "not measured: the planner's default";
}

TEST(SnapshotOfTest, EachDeviceNamesTheCollectiveBackendItsRankWouldUse) {
  api::Node a = NodeWith("boxa", 3, {});
  a.devices[1].emulated = true;
  a.devices[2].type = "cpu";
  auto s = SnapshotOf({a}, {});
  ASSERT_EQ(s.nodes.size(), 1u);
  EXPECT_EQ(s.nodes[0].devices[0].backend, "nccl");
  EXPECT_EQ(s.nodes[0].devices[1].backend, "gloo");
  EXPECT_EQ(s.nodes[0].devices[2].backend, "gloo");
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
    n.network.bandwidth_bytes_per_s = c.bandwidth;
    n.network.latency_s = c.latency;
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

// A node whose ranks talk Gloo plans its links with the loopback Gloo link its
// agent measured, and shares its machine's cores with the nodes of its address;
// a node of real GPUs (NCCL) keeps its links whatever its agent measured.
TEST(SnapshotOfTest, AMeasuredGlooLinkIsTheLinkOfNodesWhoseRanksTalkGloo) {
  const scheduler::Node defaults;
  struct Case {
    const char* name;
    bool emulated;
    double gloo_bandwidth;      // 0: not measured
    double declared_bandwidth;  // 0: no network link declared
    double declared_latency;
    scheduler::Link want_intra;
    scheduler::Link want_network;
    std::string want_host;
  } cases[] = {
      {"emulated_measured", true, 1e9, 0, 0, {1e9, 5e-4}, defaults.network, "10.0.0.1"},
      {"emulated_declared_slow_link",
       true,
       1e9,
       2.5e6,
       0.002,
       {1e9, 5e-4},
       {2.5e6, 0.002},
       "10.0.0.1"},
      {"emulated_not_measured", true, 0, 0, 0, defaults.intra_node, defaults.network, ""},
      {"real_gpus_measured", false, 1e9, 0, 0, defaults.intra_node, defaults.network, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    api::Node n = NodeWith("boxa", 2, {});
    for (api::Device& d : n.devices) {
      d.emulated = c.emulated;
      d.relative_speed = 0.5;
    }
    n.cpu_cores = 2;
    n.gloo_link.bandwidth_bytes_per_s = c.gloo_bandwidth;
    n.gloo_link.latency_s = c.gloo_bandwidth > 0 ? 5e-4 : 0;
    n.gloo_link.cpu_per_hop_s = c.gloo_bandwidth > 0 ? 3e-4 : 0;
    n.network.bandwidth_bytes_per_s = c.declared_bandwidth;
    n.network.latency_s = c.declared_latency;
    scheduler::ClusterSnapshot s = SnapshotOf({n}, {});
    ASSERT_TRUE(s.Validate().ok());
    const scheduler::Node& got = s.nodes.at(0);
    EXPECT_DOUBLE_EQ(got.intra_node.bandwidth_bytes_per_s, c.want_intra.bandwidth_bytes_per_s);
    EXPECT_DOUBLE_EQ(got.intra_node.latency_s, c.want_intra.latency_s);
    EXPECT_DOUBLE_EQ(got.network.bandwidth_bytes_per_s, c.want_network.bandwidth_bytes_per_s);
    EXPECT_DOUBLE_EQ(got.network.latency_s, c.want_network.latency_s);
    EXPECT_EQ(got.host, c.want_host);
    EXPECT_EQ(got.host_cores, c.want_host.empty() ? 0 : 2);
    EXPECT_DOUBLE_EQ(got.collective_cpu_per_hop_s, c.want_host.empty() ? 0 : 3e-4);
  }
}

// Nodes of one address reach each other over its loopback unless they declare a
// network link; nodes of other addresses over the network.
TEST(SnapshotOfTest, NodesOfOneMachineAreLinkedByTheirLoopbackGlooLink) {
  auto emulated = [](const std::string& name, const std::string& address, double latency) {
    api::Node n = NodeWith(name, 1, {});
    n.address = address;
    n.devices[0].emulated = true;
    n.devices[0].relative_speed = 0.5;
    n.gloo_link.bandwidth_bytes_per_s = 1e9;
    n.gloo_link.latency_s = latency;
    return n;
  };
  api::Node gpus = NodeWith("boxg", 1, {});  // real GPUs (NCCL) on the same machine
  gpus.address = "127.0.0.1";
  gpus.gloo_link.bandwidth_bytes_per_s = 1e9;
  gpus.gloo_link.latency_s = 1e-3;
  api::Node declared = emulated("boxd", "127.0.0.1", 1e-4);
  declared.network.bandwidth_bytes_per_s = 2.5e6;
  declared.network.latency_s = 0.002;
  scheduler::ClusterSnapshot s =
      SnapshotOf({emulated("boxa", "127.0.0.1", 3e-4), emulated("boxb", "127.0.0.1", 5e-4),
                  emulated("boxc", "10.0.0.7", 1e-4), declared, gpus},
                 {});
  ASSERT_TRUE(s.Validate().ok());
  ASSERT_EQ(s.node_links.size(), 1u) << "boxa-boxb only: not boxc, boxd (declared), boxg (NCCL)";
  EXPECT_EQ(s.node_links[0].a, "boxa");
  EXPECT_EQ(s.node_links[0].b, "boxb");
  EXPECT_DOUBLE_EQ(s.node_links[0].link.latency_s, 5e-4) << "the slower of the two";
  EXPECT_DOUBLE_EQ(s.LinkBetween({"boxa", 0}, {"boxc", 0}).latency_s,
                   scheduler::Node{}.network.latency_s);
  EXPECT_DOUBLE_EQ(s.LinkBetween({"boxa", 0}, {"boxd", 0}).latency_s, 0.002);
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

// ---- gan-pix2pix: profiled like every builtin model, planned data parallel ----

TEST(BuiltinModelsToProfileTest, EveryBuiltinEntrypointIsProfiled) {
  // Without a profile a builtin job can never be planned ("no builtin model").
  const std::vector<std::string> models = BuiltinModelsToProfile();
  for (std::string_view entrypoint : kBuiltinEntrypoints) {
    const std::string model(entrypoint.substr(std::string_view("builtin:").size()));
    EXPECT_NE(std::find(models.begin(), models.end(), model), models.end()) << model;
  }
  EXPECT_NE(std::find(models.begin(), models.end(), "gan-pix2pix"), models.end());
}

// What `tessera-worker profile --model gan-pix2pix` prints, in small: generator
// layers then discriminator layers, whole-step times, data parallel only.
std::string GanProfileText() {
  auto layer = [](const std::string& name, double fwd_ms, double bwd_ms) {
    return nlohmann::json{{"name", name},
                          {"fwd_ms", fwd_ms},
                          {"bwd_ms", bwd_ms},
                          {"fwd_flops_per_sample", 1e6},
                          {"param_bytes", 1 << 20},
                          {"activation_bytes_per_sample", 1 << 20},
                          {"output_bytes_per_sample", 1 << 16}};
  };
  return nlohmann::json{{"model", "gan-pix2pix"},
                        {"device", "cpu"},
                        {"batch", 8},
                        {"in_shape", {1, 64, 64}},
                        {"layers",
                         {layer("g_enc", 40, 80), layer("g_dec", 40, 80), layer("d_a", 20, 40),
                          layer("d_out", 4, 8)}},
                        {"data_parallel_only", true},
                        {"max_micro_batches", 1}}
      .dump();
}

api::Node EmulatedNode(const std::string& name, std::vector<double> speeds) {
  api::Node n = NodeWith(name, static_cast<int>(speeds.size()), {});
  for (size_t i = 0; i < speeds.size(); ++i) {
    n.devices[i].emulated = true;
    n.devices[i].relative_speed = speeds[i];
    n.devices[i].memory_bytes = int64_t{4} << 30;
  }
  return n;
}

TEST(PlanJobTest, GanPix2PixIsPlannedDataParallelWithItsMeasuredProfile) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tessera-gan-profiles-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ProfileCache cache(dir, BuiltinModelsToProfile(), [](const ProfileTarget& target) {
    return Result<std::string>(target.model == "gan-pix2pix" ? GanProfileText()
                                                             : std::string("{}"));
  });
  ProfileLookup lookup = [&cache](const ProfileTarget& target) { return cache.Get(target); };
  api::JobSpec spec;
  spec.entrypoint = "builtin:gan-pix2pix";
  spec.global_batch = 12;
  spec.steps = 10;
  const scheduler::ClusterSnapshot snapshot =
      SnapshotOf({EmulatedNode("boxa", {1.0, 0.5}), EmulatedNode("boxb", {0.5})}, {});

  // Before the profile is measured the job waits, it is not refused.
  auto waiting = PlanJob(snapshot, spec, lookup);
  ASSERT_FALSE(waiting.ok());
  EXPECT_TRUE(IsMeasuringProfile(waiting.status())) << waiting.status().ToString();

  cache.StartWarmup();
  for (int i = 0; i < 500 && IsMeasuringProfile(cache.Get("gan-pix2pix").status()); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto plans = PlanJob(snapshot, spec, lookup);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  ASSERT_FALSE(plans->plans.empty());
  for (const scheduler::Plan& p : plans->plans) {
    EXPECT_EQ(p.layout, scheduler::Layout::kData);
    EXPECT_EQ(p.micro_batches, 1);
    int64_t batch = 0;
    for (const scheduler::Replica& r : p.replicas) {
      ASSERT_EQ(r.stages.size(), 1u);
      EXPECT_EQ(r.stages[0].layer_begin, 0);
      EXPECT_EQ(r.stages[0].layer_end, 4) << "every layer of both networks on one device";
      batch += r.batch;
    }
    EXPECT_EQ(batch, 12);
  }
  // Shares follow the devices' speed: the full-speed device gets the largest.
  const scheduler::Plan& best = plans->plans.front();
  ASSERT_GE(best.replicas.size(), 2u);
  int64_t fast = 0, slow = 0;
  for (const scheduler::Replica& r : best.replicas) {
    if (r.stages[0].devices[0].ToString() == "boxa:0") {
      fast = r.batch;
    } else {
      slow = std::max(slow, r.batch);
    }
  }
  EXPECT_GE(fast, slow);
  bool pipeline = false, hybrid = false;
  for (const scheduler::Rejection& r : plans->rejected) {
    const bool split =
        r.reason.find("gan-pix2pix cannot be split into stages") != std::string::npos;
    pipeline |= r.layout == scheduler::Layout::kPipeline && split;
    hybrid |= r.layout == scheduler::Layout::kHybrid && split;
  }
  EXPECT_TRUE(pipeline);
  EXPECT_TRUE(hybrid);

  // A forced pipeline is refused with the reason, not attempted.
  spec.layout = "pipeline";
  auto forced = PlanJob(snapshot, spec, lookup);
  ASSERT_FALSE(forced.ok());
  EXPECT_EQ(forced.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(forced.status().message().find("cannot be split into stages"), std::string::npos)
      << forced.status().message();
  std::filesystem::remove_all(dir);
}

// A train job's --image-size is the request's image: its pixels scale the
// profile's activations and FLOPs. An infer job's image is its
// image_width x image_height; a crop that is no whole number is refused.
// colorize-unet's two layers as `tessera-worker profile` prints them, measured on
// `device` with batch 4: each layer's forward `fwd_ms`, backward twice that.
nlohmann::json TwoLayerProfile(const std::string& device, double fwd_ms,
                               const std::string& second = "head") {
  nlohmann::json layers = nlohmann::json::array();
  for (const std::string& name : {std::string("enc0"), second}) {
    layers.push_back({{"name", name},
                      {"fwd_flops", 4.0e8},
                      {"fwd_flops_per_sample", 1.0e8},
                      {"param_bytes", 4096},
                      {"activation_bytes_per_sample", 262144},
                      {"output_bytes_per_sample", 131072},
                      {"fwd_ms", fwd_ms},
                      {"bwd_ms", 2 * fwd_ms}});
  }
  return {{"model", "colorize-unet"},
          {"device", device},
          {"batch", 4},
          {"in_shape", {1, 64, 64}},
          {"layers", layers}};
}

api::Node GpuNode(const std::string& name, const std::string& type, bool emulated,
                  std::optional<nlohmann::json> profile) {
  api::Node n = NodeWith(name, 1, {});
  n.devices[0].name = type;
  n.devices[0].emulated = emulated;
  if (profile) n.devices[0].profiles["colorize-unet"] = *profile;
  return n;
}

// A GPU type whose agent measured the job's builtin model is planned by those
// times; other types keep the estimate from their throughput; emulated devices,
// model files and a profile of other layers lend nothing.
TEST(PlanJobTest, AGpuTypeIsPlannedByTheProfileItsAgentMeasured) {
  auto cpu = scheduler::ModelProfileFromWorkerJson(TwoLayerProfile("cpu", 40.0));
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  ProfileLookup lookup = [&](const ProfileTarget&) {
    return Result<scheduler::ModelProfile>(*cpu);
  };
  api::JobSpec spec;
  spec.entrypoint = "builtin:colorize-unet";
  spec.global_batch = 8;
  spec.steps = 10;

  const auto snapshot =
      SnapshotOf({GpuNode("fast", "H100", false, TwoLayerProfile("cuda:0", 0.4)),
                  GpuNode("slow", "H100-slow", false, TwoLayerProfile("cuda:0", 400.0)),
                  GpuNode("plain", "L4", false, std::nullopt),
                  GpuNode("emu", "emulated-A100", true, TwoLayerProfile("cpu", 0.1)),
                  GpuNode("other", "A10", false, TwoLayerProfile("cuda:0", 0.1, "tail"))},
                 {});
  ASSERT_EQ(snapshot.device_profiles.size(), 3u) << "H100, H100-slow and A10; not the emulated one";
  scheduler::ModelProfile merged = *cpu;
  AddDeviceMeasuredTimes(snapshot, spec, "", &merged);
  EXPECT_DOUBLE_EQ(merged.layers[0].measured_forward_ms.at("H100"), 0.1);  // per sample
  EXPECT_DOUBLE_EQ(merged.layers[1].measured_backward_ms.at("H100-slow"), 200.0);
  EXPECT_FALSE(merged.layers[0].measured_forward_ms.contains("A10")) << "other layers";
  EXPECT_FALSE(merged.layers[0].measured_forward_ms.contains("L4"));
  EXPECT_DOUBLE_EQ(merged.layers[0].measured_forward_ms.at("cpu"), 10.0);
  scheduler::ModelProfile file_profile = *cpu;
  api::JobSpec file_spec = spec;
  file_spec.entrypoint = "model:seq";
  AddDeviceMeasuredTimes(snapshot, file_spec, "/srv/models/seq.pt", &file_profile);
  EXPECT_EQ(file_profile, *cpu) << "a model file's profile is measured on the CPU only";

  // One device alone: the H100's plan predicts its measured 0.1 + 0.2 ms per sample
  // (plus the optimizer's estimate); the slow one's 1000 times that.
  auto step_on = [&](const std::string& node, const std::string& type) {
    auto plans = PlanJob(SnapshotOf({GpuNode(node, type, false,
                                             type == "H100" ? TwoLayerProfile("cuda:0", 0.4)
                                                            : TwoLayerProfile("cuda:0", 400.0))},
                                    {}),
                         spec, lookup);
    EXPECT_TRUE(plans.ok()) << plans.status().ToString();
    return plans.ok() && !plans->plans.empty() ? plans->plans[0].predicted.step_s : 0.0;
  };
  const double fast = step_on("fast", "H100");
  const double slow = step_on("slow", "H100-slow");
  EXPECT_GT(fast, 0.0);
  EXPECT_GE(slow, 8 * 2 * (200.0 + 100.0) * 1e-3 * 0.99) << "8 samples x 300 ms x 2 layers";
  EXPECT_LT(fast, slow / 100);
}

TEST(RequestOfTest, ATrainJobsCropSizeIsItsImage) {
  struct Row {
    const char* name;
    api::JobKind kind;
    std::vector<std::string> args;
    std::optional<int> side;  // nullopt: no image
    bool ok = true;
  };
  const Row rows[] = {
      {"no crop", api::JobKind::kTrain, {}, std::nullopt},
      {"crop 128", api::JobKind::kTrain, {"--image-size", "128"}, 128},
      {"crop 32 after other flags",
       api::JobKind::kTrain,
       {"--width", "8", "--image-size", "32"},
       32},
      {"infer: its image, not a crop", api::JobKind::kInfer, {"--image-size", "128"}, std::nullopt},
      {"not a number", api::JobKind::kTrain, {"--image-size", "big"}, std::nullopt, false},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    api::JobSpec spec;
    spec.kind = row.kind;
    spec.global_batch = 8;
    spec.args = row.args;
    auto request = RequestOf(spec, /*opaque=*/false);
    if (!row.ok) {
      ASSERT_FALSE(request.ok());
      EXPECT_EQ(request.status().field(), "args");
      continue;
    }
    ASSERT_TRUE(request.ok()) << request.status().ToString();
    ASSERT_EQ(request->image.has_value(), row.side.has_value());
    if (row.side) {
      EXPECT_EQ(request->image->width, *row.side);
      EXPECT_EQ(request->image->height, *row.side);
    }
  }
}

// ---- what each entrypoint kind is planned with ----

// A builtin model is planned with its measured profile, and so is a model:
// entrypoint's train job with its file's (asked with the job's convention,
// crop size and loss); a registered command and an exported model's infer
// job are opaque: the generic profile, and an auto layout becomes data
// parallel. A model file that cannot be profiled trains opaque when the
// layout allows, and a pipeline asked of it is refused with the reason.
TEST(ProfileOfTest, EachEntrypointKindGetsItsProfileAndLayout) {
  const Status unreadable = FailedPrecondition("cannot profile model file /m/seq.pt: no such file");
  struct Row {
    const char* name;
    const char* entrypoint;
    api::JobKind kind;
    const char* layout;
    const char* model_file;
    std::vector<std::string> args;
    Status lookup;              // what the lookup answers (OK: a profile named after the target)
    std::string looked_up;      // the target asked for; "" none
    std::string profile;        // the profile planned with; "" an error
    scheduler::Layout request;  // the request's layout
  };
  using api::JobKind;
  using scheduler::Layout;
  // clang-format off
  const Row rows[] = {
      {"builtin", "builtin:colorize-unet", JobKind::kInfer, "auto", "", {}, Status::Ok(),
       "--model colorize-unet", "colorize-unet", Layout::kAuto},
      {"command", "cmd:train-ddp", JobKind::kTrain, "auto", "", {}, Status::Ok(),
       "", "generic", Layout::kData},
      {"model infer", "model:lab-unet", JobKind::kInfer, "auto", "/m/unet.pt", {}, Status::Ok(),
       "", "generic", Layout::kData},
      {"model train", "model:lab-seq", JobKind::kTrain, "auto", "/m/seq.pt",
       {"--lr", "0.1", "--image-size=32", "--loss", "l1"}, Status::Ok(),
       "--model-file /m/seq.pt --image-input gray --image-size 32 --loss l1", "/m/seq.pt",
       Layout::kAuto},
      {"model train, pipeline", "model:lab-seq", JobKind::kTrain, "pipeline", "/m/seq.pt", {},
       Status::Ok(), "--model-file /m/seq.pt --image-input gray", "/m/seq.pt", Layout::kPipeline},
      {"model train, no file known", "model:lab-seq", JobKind::kTrain, "auto", "", {},
       Status::Ok(), "", "generic", Layout::kData},
      {"unprofiled file", "model:lab-seq", JobKind::kTrain, "auto", "/m/seq.pt", {}, unreadable,
       "--model-file /m/seq.pt --image-input gray", "generic", Layout::kData},
      {"unprofiled file, hybrid", "model:lab-seq", JobKind::kTrain, "hybrid", "/m/seq.pt", {},
       unreadable, "--model-file /m/seq.pt --image-input gray", "", Layout::kHybrid},
      {"file being measured", "model:lab-seq", JobKind::kTrain, "auto", "/m/seq.pt", {},
       MeasuringProfile(7), "--model-file /m/seq.pt --image-input gray", "", Layout::kAuto},
  };
  // clang-format on
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    std::string looked_up;
    ProfileLookup lookup = [&](const ProfileTarget& target) -> Result<scheduler::ModelProfile> {
      for (const std::string& a : target.WorkerArgs())
        looked_up += (looked_up.empty() ? "" : " ") + a;
      if (!row.lookup.ok()) return row.lookup;
      scheduler::ModelProfile p;
      p.name = target.is_file() ? target.model_file : target.model;
      return p;
    };
    api::JobSpec spec;
    spec.kind = row.kind;
    spec.entrypoint = row.entrypoint;
    spec.global_batch = 8;
    spec.layout = row.layout;
    spec.args = row.args;
    spec.image.input = "gray";
    auto profile = ProfileOf(spec, lookup, row.model_file);
    EXPECT_EQ(looked_up, row.looked_up);
    if (row.profile.empty()) {
      ASSERT_FALSE(profile.ok());
      if (IsMeasuringProfile(row.lookup)) {
        EXPECT_EQ(profile.status(), row.lookup);
      } else {
        EXPECT_EQ(profile.status().code(), StatusCode::kFailedPrecondition);
        EXPECT_EQ(profile.status().field(), "layout");
        EXPECT_NE(profile.status().message().find("no such file"), std::string::npos)
            << profile.status().message();
      }
    } else {
      ASSERT_TRUE(profile.ok()) << profile.status().ToString();
      EXPECT_EQ(profile->model.name, row.profile);
      EXPECT_EQ(profile->opaque, row.profile == "generic");
    }
    auto request = RequestOf(spec, profile.ok() && profile->opaque);
    ASSERT_TRUE(request.ok()) << request.status().ToString();
    EXPECT_EQ(request->layout, row.request);
  }
}

}  // namespace
}  // namespace tessera::daemon
