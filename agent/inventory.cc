#include "agent/inventory.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <thread>

#include "agent/benchmark_cache.h"
#include "agent/cpu_discovery.h"
#include "agent/device_benchmark.h"
#include "agent/inventory_file.h"
#include "agent/nvml_discovery.h"
#include "common/enum_names.h"

namespace tessera::agent {

constexpr EnumName<LinkKind> kLinkKindNames[] = {
    {LinkKind::kNvLink, "nvlink"},
    {LinkKind::kPcie, "pcie"},
    {LinkKind::kSystem, "system"},
    {LinkKind::kUnknown, "unknown"},
};
static_assert(IsValidNameTable(kLinkKindNames));

std::string_view LinkKindName(LinkKind kind) { return NameOf(kLinkKindNames, kind); }

const api::Device* NodeInventory::Find(int64_t index) const {
  for (const auto& d : devices) {
    if (d.index == index) return &d;
  }
  return nullptr;
}

api::DeviceLink ToProtocol(const DeviceLink& link) {
  return api::DeviceLink{link.a, link.b, std::string(LinkKindName(link.kind)), link.nvlink_count,
                         link.topology};
}

api::Json ToJson(const DeviceLink& link) { return api::ToJson(ToProtocol(link)); }

SystemInventoryProvider::SystemInventoryProvider(InventoryOptions options)
    : options_(std::move(options)) {}

SystemInventoryProvider::~SystemInventoryProvider() = default;

namespace {

// Measured figures for a real device, from the cache or a fresh benchmark.
// A failed benchmark gives zeros and, in *error, the reason.
BenchmarkFigures Measure(const api::Device& device, BenchmarkCache& cache,
                         const InventoryOptions& options, bool* cache_changed, std::string* error) {
  const std::string key = BenchmarkCache::KeyFor(device);
  if (!options.rebenchmark) {
    if (auto cached = cache.Get(key)) return *cached;
  }
  const std::string torch_device =
      device.type == "cuda" ? "cuda:" + std::to_string(device.index) : "cpu";
  auto figures = options.benchmark(torch_device);
  if (!figures.ok()) {
    spdlog::warn("benchmark of {} ({}) skipped: {}", torch_device, device.name,
                 figures.status().ToString());
    *error = "benchmark of " + torch_device + " failed: " + figures.status().ToString();
    return {};
  }
  spdlog::info("benchmark of {} ({}): {:.3f} TFLOPS fp32, {:.3f} fp16, {:.3f} bf16, {:.1f} GB/s",
               torch_device, device.name, figures->tflops, figures->tflops_fp16,
               figures->tflops_bf16, figures->mem_bandwidth_gbps);
  cache.Put(key, *figures);
  *cache_changed = true;
  return *figures;
}

// A builtin model's layer profile measured on a real GPU, from the cache or the
// options' profile; nullopt (logged) when it cannot be measured.
std::optional<api::Json> MeasureProfile(const api::Device& device, const std::string& model,
                                        BenchmarkCache& cache, const InventoryOptions& options,
                                        bool* cache_changed, std::string* error) {
  const std::string key =
      BenchmarkCache::KeyFor(device) + "|" + model + "|" + options.profile_version;
  if (!options.rebenchmark) {
    if (auto cached = cache.GetProfile(key)) return cached;
  }
  const std::string torch_device = "cuda:" + std::to_string(device.index);
  Result<std::string> text = options.profile(torch_device, model);
  api::Json j;
  if (text.ok()) j = api::Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!text.ok() || !j.is_object() || j.dump().size() > api::kMaxDeviceProfileBytes) {
    const std::string why =
        text.ok() ? "not a profile of at most 256 KiB" : text.status().ToString();
    spdlog::warn(
        "profile of {} on {} ({}) left out, its times are estimated from the "
        "benchmark: {}",
        model, torch_device, device.name, why);
    *error = "profile of " + model + " on " + torch_device + " failed: " + why;
    return std::nullopt;
  }
  spdlog::info("profile of {} on {} ({}): {} layers", model, torch_device, device.name,
               j.contains("layers") ? j["layers"].size() : 0);
  cache.PutProfile(key, j);
  *cache_changed = true;
  return j;
}

}  // namespace

Result<NodeInventory> SystemInventoryProvider::Load() {
  std::optional<InventoryFile> file;
  if (!options_.inventory_file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(file, LoadInventoryFile(options_.inventory_file));
    const double cores = options_.host_cores > 0
                             ? options_.host_cores
                             : static_cast<double>(std::thread::hardware_concurrency());
    Status fits = CheckEmulationCapacity(*file, cores);
    if (!fits.ok()) return fits.WithPrefix("inventory file " + options_.inventory_file.string());
  }
  NodeInventory inv;
  const bool discover = !file || file->combine || options_.force_combine;
  if (discover) {
    auto gpus = DiscoverNvmlGpus(options_.nvml_library);
    if (!gpus.ok()) {
      spdlog::warn("NVML discovery failed, offering no GPUs: {}", gpus.status().ToString());
    } else {
      inv.devices = std::move(gpus->devices);
      inv.links = std::move(gpus->links);
    }
    if (inv.devices.empty()) {
      TESSERA_ASSIGN_OR_RETURN(api::Device cpu, DiscoverCpuDevice(options_.proc_root));
      inv.devices.push_back(std::move(cpu));
    }
  }

  BenchmarkCache cache(options_.state_dir.empty() ? std::filesystem::path()
                                                  : options_.state_dir / "inventory-cache.json");
  cache.Load();
  bool cache_changed = false;
  if (options_.benchmark) {
    for (auto& d : inv.devices) {
      BenchmarkFigures f = Measure(d, cache, options_, &cache_changed, &d.measure_error);
      d.measured_tflops = f.tflops;
      d.measured_tflops_half = f.tflops_half;
      d.mem_bandwidth_gbps = f.mem_bandwidth_gbps;
    }
  }
  if (options_.profile) {
    // Each model once per GPU type, for every device of that type.
    std::map<std::pair<std::string, std::string>, std::optional<api::Json>> by_type;
    std::map<std::string, std::string> errors;  // by type: the first failure's reason
    for (auto& d : inv.devices) {
      if (d.type != "cuda" || d.emulated || !d.measure_error.empty()) continue;
      for (const std::string& model : options_.profile_models) {
        auto [it, fresh] = by_type.try_emplace({d.name, model});
        std::string error;
        if (fresh) it->second = MeasureProfile(d, model, cache, options_, &cache_changed, &error);
        if (!error.empty()) errors.try_emplace(d.name, error);
        if (it->second) d.profiles[model] = *it->second;
      }
      if (auto e = errors.find(d.name); e != errors.end()) d.profile_error = e->second;
    }
  }

  if (file) {
    inv.network = file->network;
    // Emulated devices run on the CPU: their figures are the CPU's, scaled.
    BenchmarkFigures cpu_figures;
    std::string cpu_error;
    if (options_.benchmark) {
      TESSERA_ASSIGN_OR_RETURN(api::Device cpu, DiscoverCpuDevice(options_.proc_root));
      cpu_figures = Measure(cpu, cache, options_, &cache_changed, &cpu_error);
    }
    for (const auto& spec : file->devices) {
      api::Device d;
      d.index = static_cast<int64_t>(inv.devices.size());
      d.name = spec.name;
      d.uuid = "emulated-" + std::to_string(d.index);
      d.type = "cuda";  // pretends to be a GPU for planning
      d.emulated = true;
      d.memory_bytes = spec.memory_bytes;
      d.relative_speed = spec.relative_speed;
      d.measured_tflops = spec.tflops.value_or(cpu_figures.tflops * spec.relative_speed);
      // An emulated device computes in float32 on the CPU whatever the job's
      // precision, so the CPU's 16-bit figure says nothing about it: declared, or 0
      // (the planner then assumes 2 x tflops, as for a GPU not measured).
      d.measured_tflops_half = spec.tflops_half.value_or(0.0);
      d.mem_bandwidth_gbps = cpu_figures.mem_bandwidth_gbps * spec.relative_speed;
      if (d.measured_tflops <= 0 && !cpu_error.empty()) d.measure_error = cpu_error;
      inv.devices.push_back(std::move(d));
    }
  }
  if (options_.gloo_link &&
      std::any_of(inv.devices.begin(), inv.devices.end(),
                  [](const api::Device& d) { return d.emulated || d.type == "cpu"; })) {
    Result<LinkFigures> link = options_.gloo_link();
    if (link.ok()) {
      inv.gloo_link = *link;
    } else {
      spdlog::warn("loopback Gloo link not measured (the planner assumes its default link): {}",
                   link.status().ToString());
    }
  }
  if (cache_changed) {
    Status saved = cache.Save();
    if (!saved.ok()) spdlog::warn("benchmark cache not saved: {}", saved.ToString());
  }
  for (size_t i = 0; i < inv.devices.size(); ++i) inv.devices[i].index = static_cast<int64_t>(i);
  return inv;
}

void SystemInventoryProvider::Refresh(NodeInventory* inventory) {
  for (auto& d : inventory->devices) {
    if (d.emulated) continue;
    if (d.type == "cpu") {
      if (auto t = ReadCpuTimes(options_.proc_root)) {
        if (last_cpu_total_ != 0 && t->total > last_cpu_total_) {
          d.utilization = static_cast<double>(t->busy - last_cpu_busy_) /
                          static_cast<double>(t->total - last_cpu_total_);
        }
        last_cpu_busy_ = t->busy;
        last_cpu_total_ = t->total;
      }
      if (auto used = ReadMemoryUsed(options_.proc_root)) d.memory_used_bytes = *used;
    } else if (d.type == "cuda") {
      if (!nvml_tried_) {
        nvml_tried_ = true;
        auto opened = NvmlLibrary::Open(options_.nvml_library);
        if (opened.ok()) nvml_ = std::move(*opened);
      }
      if (nvml_) nvml_->Sample(d.index, &d.utilization, &d.memory_used_bytes);
    }
  }
}

}  // namespace tessera::agent
