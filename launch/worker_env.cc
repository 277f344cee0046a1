#include "launch/worker_env.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <sstream>

#include "common/quantities.h"

namespace tessera::launch {
namespace {

std::string FormatSpeed(double speed) {
  std::ostringstream out;
  out << speed;
  return out.str();
}

bool IsRealGpu(const api::Device& d) { return d.type == "cuda" && !d.emulated; }

// How CUDA_VISIBLE_DEVICES names a real GPU.
std::string VisibleId(const api::Device& d) {
  return d.uuid.empty() ? std::to_string(d.index) : d.uuid;
}

// The ranks of `launch`'s job and attempt on this node (itself included), in
// LOCAL_RANK order (RANK breaks ties and stands in where LOCAL_RANK is absent).
std::vector<const api::WorkerLaunch*> Siblings(const api::WorkerLaunch& launch,
                                               const std::vector<api::WorkerLaunch>& desired) {
  std::vector<const api::WorkerLaunch*> group = {&launch};
  for (const api::WorkerLaunch& other : desired) {
    if (other.key.job_id == launch.key.job_id && other.key.attempt == launch.key.attempt &&
        other.key.rank != launch.key.rank) {
      group.push_back(&other);
    }
  }
  auto order = [](const api::WorkerLaunch* l) {
    return std::pair(EnvInt(*l, "LOCAL_RANK").value_or(l->key.rank), l->key.rank);
  };
  std::sort(
      group.begin(), group.end(),
      [&](const api::WorkerLaunch* a, const api::WorkerLaunch* b) { return order(a) < order(b); });
  return group;
}

}  // namespace

std::optional<int64_t> EnvInt(const api::WorkerLaunch& launch, const std::string& name) {
  auto it = launch.env.find(name);
  if (it == launch.env.end()) return std::nullopt;
  return ParseWholeNumber(it->second);
}

const api::Device* FindDevice(const std::vector<api::Device>& devices, int64_t index) {
  for (const api::Device& d : devices) {
    if (d.index == index) return &d;
  }
  return nullptr;
}

EnvMap DefaultBaseEnv() {
  EnvMap env = {{"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
                {"LANG", "C.UTF-8"}};
  for (const char* name : {"HOME", "USER", "LOGNAME", "TMPDIR", "TZ", "LD_LIBRARY_PATH"}) {
    if (const char* v = std::getenv(name)) env[name] = v;
  }
  return env;
}

Result<EnvMap> DeviceEnvFor(const api::WorkerLaunch& launch,
                            const std::vector<api::WorkerLaunch>& node_desired,
                            const std::vector<api::Device>& devices, int64_t host_cores) {
  EnvMap env;
  std::string own_first_gpu;  // VisibleId of the rank's first real GPU
  bool any_real_gpu = false;
  bool any_simulated = false;
  double speed = 0;
  int64_t emulated_memory = 0;  // the smallest emulated device's memory
  for (size_t i = 0; i < launch.device_indices.size(); ++i) {
    const std::string field = "device_indices[" + std::to_string(i) + "]";
    const api::Device* d = FindDevice(devices, launch.device_indices[i]);
    if (d == nullptr) {
      return InvalidArgument(
          "no device " + std::to_string(launch.device_indices[i]) + " on this node", field);
    }
    if (IsRealGpu(*d)) {
      if (!any_real_gpu) own_first_gpu = VisibleId(*d);
      any_real_gpu = true;
    } else {
      any_simulated = true;
    }
    if (d->emulated && d->memory_bytes > 0) {
      emulated_memory =
          emulated_memory == 0 ? d->memory_bytes : std::min(emulated_memory, d->memory_bytes);
    }
    double s = d->emulated ? d->relative_speed : 1.0;
    speed = i == 0 ? s : std::min(speed, s);
  }
  if (any_real_gpu && any_simulated) {
    return InvalidArgument("a rank cannot mix real GPUs with CPU or emulated devices",
                           "device_indices");
  }
  if (launch.device_indices.empty()) speed = 1.0;

  const std::vector<const api::WorkerLaunch*> siblings = Siblings(launch, node_desired);
  // As torchrun: every GPU of the job on this node, in LOCAL_RANK order, so
  // cuda:LOCAL_RANK is the rank's own and peers' GPUs are reachable (NVLink).
  std::vector<std::string> visible;
  if (any_real_gpu) {
    for (const api::WorkerLaunch* sibling : siblings) {
      for (int64_t index : sibling->device_indices) {
        const api::Device* d = FindDevice(devices, index);
        if (d == nullptr || !IsRealGpu(*d)) continue;
        std::string id = VisibleId(*d);
        if (std::find(visible.begin(), visible.end(), id) == visible.end()) {
          visible.push_back(std::move(id));
        }
      }
    }
  }
  std::string visible_text;
  for (const std::string& id : visible) {
    if (!visible_text.empty()) visible_text += ",";
    visible_text += id;
  }
  const auto own = std::find(visible.begin(), visible.end(), own_first_gpu);
  env["TESSERA_DEVICE"] =
      any_real_gpu ? "cuda:" + std::to_string(own - visible.begin()) : std::string("cpu");
  env["TESSERA_DEVICE_SPEED"] = FormatSpeed(speed);
  // An emulated device fails like a GPU when its tensors exceed its memory.
  if (emulated_memory > 0) env["TESSERA_DEVICE_MEMORY"] = std::to_string(emulated_memory);
  env["CUDA_VISIBLE_DEVICES"] = visible_text;
  env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  // The node's cores are shared by its ranks of this job, as torchrun does.
  if (!launch.env.contains("OMP_NUM_THREADS")) {
    int64_t local_world = EnvInt(launch, "LOCAL_WORLD_SIZE").value_or(0);
    if (local_world <= 0) local_world = static_cast<int64_t>(siblings.size());
    env["OMP_NUM_THREADS"] =
        std::to_string(std::max<int64_t>(1, std::max<int64_t>(1, host_cores) / local_world));
  }
  return env;
}

}  // namespace tessera::launch
