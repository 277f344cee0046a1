#include "daemon/controller/planning.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>

#include "api/entrypoint_kind.h"
#include "api/job_images.h"
#include "api/job_spec_validation.h"
#include "daemon/controller/profile_cache.h"
#include "scheduler/planner.h"
#include "scheduler/profile_json.h"

namespace tessera::daemon {
namespace {

// A registered command or exported model is opaque: one layer whose cost makes the planner
// spread the batch by device speed, and whose tiny gradient keeps it from
// preferring fewer devices for communication's sake.
scheduler::ModelProfile GenericProfile() {
  scheduler::ModelProfile p;
  p.name = "generic";
  scheduler::Layer layer;
  layer.name = "opaque";
  layer.forward_flops = 2e9;
  layer.parameter_bytes = 4 << 10;
  layer.activation_bytes = 1 << 20;
  layer.output_bytes = 4;
  p.layers.push_back(layer);
  p.input_bytes = 1 << 20;
  p.estimated = true;
  return p;
}

// Nominal figures for a discovered link kind (per direction): an NVLink
// adds ~25 GB/s per link (NVLink 3), a path across CPU sockets runs at about
// half of PCIe 4 x16. A plain or unknown PCIe path keeps the node default.
std::optional<scheduler::Link> LinkOf(const api::DeviceLink& l) {
  if (l.kind == "nvlink" && l.nvlink_count > 0) {
    return scheduler::Link{25e9 * static_cast<double>(l.nvlink_count), 5e-6};
  }
  if (l.kind == "system") return scheduler::Link{8e9, 20e-6};
  return std::nullopt;
}

}  // namespace

std::vector<std::string> EmulationCapacityWarnings(const std::vector<api::Node>& nodes) {
  struct Host {
    double speed = 0;
    int64_t cores = 0;
    std::vector<std::string> nodes;
  };
  std::map<std::string, Host> hosts;
  for (const api::Node& n : nodes) {
    if (n.health != "healthy") continue;
    double speed = 0;
    for (const api::Device& d : n.devices) {
      if (d.emulated) speed += d.relative_speed;
    }
    if (speed <= 0) continue;
    Host& h = hosts[n.address.empty() ? n.name : n.address];
    h.speed += speed;
    h.cores = std::max(h.cores, n.cpu_cores);
    h.nodes.push_back(n.name);
  }
  std::vector<std::string> out;
  for (const auto& [address, h] : hosts) {
    if (h.cores <= 0 || h.speed <= static_cast<double>(h.cores) + 1e-9) continue;
    std::string names;
    for (const std::string& n : h.nodes) names += (names.empty() ? "" : ", ") + n;
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  " on %s declare emulated speeds adding up to %.3g on %lld cores: their devices "
                  "run slower than declared, so plans are not what they predict",
                  address.c_str(), h.speed, static_cast<long long>(h.cores));
    out.push_back("nodes " + names + buf);
  }
  return out;
}

uint64_t InventoryKey(const std::vector<api::Node>& nodes) {
  uint64_t key = 14695981039346656037ull;
  for (const api::Node& n : nodes) {
    api::Json j = api::ToJson(n);
    j.erase("last_heartbeat_ms");
    // Each heartbeat's samples, which the snapshot does not read.
    for (api::Json& d : j["devices"]) {
      d.erase("utilization");
      d.erase("memory_used_bytes");
    }
    key = key * 1099511628211ull ^ std::hash<std::string>{}(j.dump());
  }
  return key;
}

bool ApplyGlooLink(const api::Node& n, scheduler::Node* node) {
  if (!n.gloo_link.known() || node->devices.empty()) return false;
  for (const scheduler::Device& d : node->devices) {
    if (d.backend != "gloo") return false;
  }
  node->intra_node = scheduler::Link{n.gloo_link.bandwidth_bytes_per_s, n.gloo_link.latency_s};
  node->host = n.address;
  node->host_cores = static_cast<int>(n.cpu_cores);
  node->collective_cpu_per_hop_s = n.gloo_link.cpu_per_hop_s;
  return true;
}

scheduler::ClusterSnapshot SnapshotOf(const std::vector<api::Node>& nodes,
                                      const std::set<std::string>& busy) {
  scheduler::ClusterSnapshot snapshot;
  std::vector<const api::Node*> looped;  // Gloo nodes on a known address, no declared link
  for (const api::Node& n : nodes) {
    if (n.health != "healthy") continue;
    scheduler::Node node;
    node.name = n.name;
    // The link the node's inventory declares; unknown: the planner's default.
    if (n.network.known()) {
      node.network = scheduler::Link{n.network.bandwidth_bytes_per_s, n.network.latency_s};
    }
    for (const api::Device& d : n.devices) {
      scheduler::Device dev;
      dev.index = static_cast<int>(d.index);
      dev.type = d.name;
      dev.memory_bytes = d.memory_bytes;
      dev.tflops = d.measured_tflops;
      dev.tflops_half = d.measured_tflops_half;
      dev.memory_bandwidth_bytes_per_s = d.mem_bandwidth_gbps * 1e9;
      dev.unmeasured_reason = d.measure_error;
      dev.busy = d.busy || busy.contains(n.name + ":" + std::to_string(d.index));
      // Ranks on real CUDA GPUs talk NCCL, the rest Gloo; a plan keeps to one.
      dev.backend = d.type == "cuda" && !d.emulated ? "nccl" : "gloo";
      // The worker's profile measures layer times on the CPU. A CPU device uses them
      // as they are; an emulated GPU's compute lasts its CPU time / its declared speed
      // (worker/runtime/emulated_device.h), which can only slow it down (a speed above
      // 1 runs at 1).
      if (d.emulated || d.type == "cpu") {
        dev.measured_as = "cpu";
        if (d.emulated && d.relative_speed > 0)
          dev.relative_speed = std::min(1.0, d.relative_speed);
      }
      // Profiles its agent measured on a real GPU: one set per type serves them all.
      if (!d.emulated && d.type == "cuda" && !d.profiles.empty()) {
        auto& by_model = snapshot.device_profiles[d.name];
        for (const auto& [model, profile] : d.profiles) by_model.try_emplace(model, profile);
      }
      node.devices.push_back(dev);
    }
    // Links the agent discovered override the node's default (PCIe) link.
    for (const api::DeviceLink& l : n.links) {
      auto link = LinkOf(l);
      if (!link) continue;
      snapshot.device_links.push_back({scheduler::DeviceId{n.name, static_cast<int>(l.a)},
                                       scheduler::DeviceId{n.name, static_cast<int>(l.b)}, *link});
    }
    if (ApplyGlooLink(n, &node) && !n.address.empty() && !n.network.known()) {
      looped.push_back(&n);
    }
    snapshot.nodes.push_back(std::move(node));
  }
  // Nodes of one machine that declare no network link reach each other over its
  // loopback: the slower of their measured Gloo links.
  for (size_t i = 0; i < looped.size(); ++i) {
    for (size_t j = i + 1; j < looped.size(); ++j) {
      const api::Node& a = *looped[i];
      const api::Node& b = *looped[j];
      if (a.address != b.address) continue;
      snapshot.node_links.push_back(
          {a.name, b.name,
           scheduler::Link{
               std::min(a.gloo_link.bandwidth_bytes_per_s, b.gloo_link.bandwidth_bytes_per_s),
               std::max(a.gloo_link.latency_s, b.gloo_link.latency_s)}});
    }
  }
  return snapshot;
}

std::string CorrectionKey(const api::JobSpec& spec) {
  std::string key = spec.entrypoint;
  for (const char* name : {"--width", "--image-size"}) {
    if (auto value = api::BuiltinOptionValue(spec.args, name)) key += " " + (name + ("=" + *value));
  }
  return key;
}

Result<scheduler::JobRequest> RequestOf(const api::JobSpec& spec, bool opaque) {
  scheduler::JobRequest r;
  r.kind =
      spec.kind == api::JobKind::kInfer ? scheduler::JobKind::kInfer : scheduler::JobKind::kTrain;
  r.global_batch = spec.global_batch;
  r.min_devices = static_cast<int>(spec.min_devices);
  r.max_devices = static_cast<int>(spec.max_devices);
  auto layout = scheduler::ParseLayout(spec.layout);
  if (!layout) return InvalidArgument("unknown layout", "layout");
  r.layout = *layout;
  // Activations and FLOPs scale by the job's pixels against the profile's own.
  TESSERA_ASSIGN_OR_RETURN(const std::optional<api::ImageExtent> images, api::JobImages(spec));
  if (images) {
    r.image =
        scheduler::ImageSize{static_cast<int>(images->width), static_cast<int>(images->height)};
  }
  // An opaque command or exported model can only run as data parallel: it
  // owns all its layers.
  if (opaque && r.layout == scheduler::Layout::kAuto) r.layout = scheduler::Layout::kData;
  TESSERA_RETURN_IF_ERROR(r.Validate());
  return r;
}

std::optional<ProfileTarget> LayeredProfileTarget(const api::JobSpec& spec,
                                                  const std::string& model_file) {
  const api::EntrypointKind kind = api::EntrypointKindOf(spec.entrypoint);
  if (kind == api::EntrypointKind::kBuiltin) {
    return BuiltinTarget(std::string(api::EntrypointId(spec.entrypoint)));
  }
  if (kind == api::EntrypointKind::kModel && spec.kind == api::JobKind::kTrain &&
      !model_file.empty()) {
    return ModelFileTarget(spec, model_file);
  }
  return std::nullopt;
}

Result<JobProfile> ProfileOf(const api::JobSpec& spec, const ProfileLookup& lookup,
                             const std::string& model_file) {
  const std::optional<ProfileTarget> layered = LayeredProfileTarget(spec, model_file);
  if (!layered) return JobProfile{GenericProfile(), /*opaque=*/true};
  if (!lookup) return FailedPrecondition("no model profiles are configured");
  if (!layered->is_file()) {
    TESSERA_ASSIGN_OR_RETURN(scheduler::ModelProfile p, lookup(*layered));
    return JobProfile{std::move(p), false};
  }
  const ProfileTarget& target = *layered;
  Result<scheduler::ModelProfile> p = lookup(target);
  if (p.ok()) return JobProfile{*std::move(p), false};
  if (IsMeasuringProfile(p.status())) return p.status();
  // Without its layers' profile the module still trains whole on each device.
  if (spec.layout == "auto" || spec.layout == "data") {
    return JobProfile{GenericProfile(), /*opaque=*/true};
  }
  return Status(StatusCode::kFailedPrecondition,
                "a " + spec.layout + " layout cuts the model by its layers' profile, and " +
                    target.Describe() + " has none: " + p.status().message(),
                "layout");
}

void AddDeviceMeasuredTimes(const scheduler::ClusterSnapshot& snapshot, const api::JobSpec& spec,
                            const std::string& model_file, scheduler::ModelProfile* profile) {
  const std::optional<ProfileTarget> target = LayeredProfileTarget(spec, model_file);
  if (!target || target->is_file()) return;
  for (const auto& [type, by_model] : snapshot.device_profiles) {
    auto it = by_model.find(target->model);
    if (it == by_model.end()) continue;
    Result<scheduler::ModelProfile> measured = scheduler::ModelProfileFromWorkerJson(it->second);
    if (!measured.ok()) continue;  // the type keeps the estimate from its throughput
    const std::string key = it->second.value("device", std::string());
    // Layers that differ (another worker version measured it): the estimate stays.
    (void)scheduler::AddMeasuredTimes(*measured, key, type, profile);
  }
}

scheduler::PlannerOptions FirstPlanOnly() {
  scheduler::PlannerOptions options;
  options.fastest_only = true;
  return options;
}

Result<scheduler::PlanSet> PlanJob(const scheduler::ClusterSnapshot& snapshot,
                                   const api::JobSpec& spec, const ProfileLookup& lookup,
                                   const std::string& model_file,
                                   const scheduler::PlannerOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(JobProfile profile, ProfileOf(spec, lookup, model_file));
  if (!profile.opaque) AddDeviceMeasuredTimes(snapshot, spec, model_file, &profile.model);
  TESSERA_ASSIGN_OR_RETURN(scheduler::JobRequest request, RequestOf(spec, profile.opaque));
  return scheduler::MakePlans(snapshot, profile.model, request, options);
}

}  // namespace tessera::daemon
