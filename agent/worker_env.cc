#include "agent/worker_env.h"

#include <algorithm>
#include <sstream>

namespace tessera::agent {
namespace {

std::string FormatSpeed(double speed) {
  std::ostringstream out;
  out << speed;
  return out.str();
}

}  // namespace

Result<EnvMap> DeviceEnvFor(const api::WorkerLaunch& launch, const NodeInventory& inventory) {
  EnvMap env;
  std::string visible;
  bool any_real_gpu = false;
  bool any_simulated = false;
  double speed = 0;
  int64_t emulated_memory = 0;  // the smallest emulated device's memory
  for (size_t i = 0; i < launch.device_indices.size(); ++i) {
    const std::string field = "device_indices[" + std::to_string(i) + "]";
    const api::Device* d = inventory.Find(launch.device_indices[i]);
    if (d == nullptr) {
      return InvalidArgument(
          "no device " + std::to_string(launch.device_indices[i]) + " on this node", field);
    }
    bool real_gpu = d->type == "cuda" && !d->emulated;
    if (real_gpu) {
      any_real_gpu = true;
      if (!visible.empty()) visible += ",";
      visible += d->uuid.empty() ? std::to_string(d->index) : d->uuid;
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
  env["TESSERA_DEVICE"] = any_real_gpu ? "cuda:0" : "cpu";
  env["TESSERA_DEVICE_SPEED"] = FormatSpeed(speed);
  // An emulated device fails like a GPU when its tensors exceed its memory.
  if (emulated_memory > 0) env["TESSERA_DEVICE_MEMORY"] = std::to_string(emulated_memory);
  env["CUDA_VISIBLE_DEVICES"] = visible;
  env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  return env;
}

}  // namespace tessera::agent
