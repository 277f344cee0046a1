#include "worker/runtime/rank_device.h"

#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/cuda.h>

#include <charconv>
#include <cstdlib>

namespace tessera::worker {
namespace {

constexpr char kField[] = "TESSERA_DEVICE";

// Parses the decimal index after `prefix` ("cuda:" or "cpu:"); -1 when malformed.
int IndexAfter(const std::string& device, size_t prefix_len) {
  const char* begin = device.data() + prefix_len;
  const char* end = device.data() + device.size();
  int index = -1;
  auto [ptr, ec] = std::from_chars(begin, end, index);
  if (ec != std::errc() || ptr != end || begin == end || index < 0) return -1;
  return index;
}

}  // namespace

Result<ResolvedDevice> ResolveRankDevice(const std::string& device, int local_rank,
                                         int visible_gpus, const std::string& visible_devices_env) {
  if (device.empty() || device == "cpu") return ResolvedDevice{};
  if (device.rfind("cpu:", 0) == 0) {
    if (IndexAfter(device, 4) < 0) {
      return InvalidArgument("bad device \"" + device + "\"", kField);
    }
    return ResolvedDevice{};
  }
  if (device != "cuda" && device.rfind("cuda:", 0) != 0) {
    return InvalidArgument("unknown device \"" + device + "\" (cpu, cuda or cuda:<k>)", kField);
  }
  const bool from_local_rank = device == "cuda";
  const int index = from_local_rank ? local_rank : IndexAfter(device, 5);
  if (index < 0) return InvalidArgument("bad device \"" + device + "\"", kField);
  const std::string visible =
      visible_devices_env.empty() ? "" : " (CUDA_VISIBLE_DEVICES=" + visible_devices_env + ")";
  if (visible_gpus <= 0) {
    return Status(StatusCode::kFailedPrecondition,
                  device + " asked for, but CUDA sees no GPU in this process" + visible +
                      ": no GPU, no NVIDIA driver, or none made visible",
                  kField);
  }
  if (index >= visible_gpus) {
    return Status(StatusCode::kFailedPrecondition,
                  (from_local_rank ? "cuda:LOCAL_RANK = cuda:" + std::to_string(index)
                                   : "cuda:" + std::to_string(index)) +
                      " asked for, but CUDA sees " + std::to_string(visible_gpus) + " GPU(s)" +
                      visible,
                  kField);
  }
  return ResolvedDevice{true, index};
}

Result<torch::Device> SelectRankDevice(const std::string& device, int local_rank) {
  const bool wants_cuda = device.rfind("cuda", 0) == 0;
  int count = 0;
  if (wants_cuda) {
    try {
      count = static_cast<int>(torch::cuda::device_count());
    } catch (const std::exception&) {
      count = 0;
    }
  }
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  TESSERA_ASSIGN_OR_RETURN(ResolvedDevice resolved,
                           ResolveRankDevice(device, local_rank, count, visible ? visible : ""));
  if (!resolved.cuda) return torch::Device(torch::kCPU);
  try {
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(resolved.index));
  } catch (const std::exception& e) {
    return Status(StatusCode::kUnavailable, "cannot select " + resolved.name() + ": " + e.what(),
                  kField);
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(resolved.index));
}

EmulatedDevice SegmentClockFor(const torch::Device& device, double speed, int threads) {
  if (!device.is_cuda()) return EmulatedDevice(speed, threads);
  const c10::DeviceIndex index = device.index();
  return EmulatedDevice(1.0, threads,
                        [index] { c10::cuda::getCurrentCUDAStream(index).synchronize(); });
}

}  // namespace tessera::worker
