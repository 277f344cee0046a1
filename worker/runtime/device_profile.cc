#include "worker/runtime/device_profile.h"

#include <chrono>

#include "worker/runtime/device_memory.h"

namespace tessera::worker {
namespace {

class CudaProfileMeter final : public ProfileMeter {
 public:
  explicit CudaProfileMeter(const torch::Device& device) : device_(device) {}
  torch::Device device() const override { return device_; }
  std::string clock_name() const override { return "cuda_wall"; }
  double Start() override {
    torch::cuda::synchronize(device_.index());
    return Now();
  }
  double ElapsedMs(double start) override {
    torch::cuda::synchronize(device_.index());
    return (Now() - start) * 1e3;
  }
  int64_t LiveBytes() override { return InUseBytes(device_); }
  int64_t PeakBytes() override { return tessera::worker::PeakBytes(device_); }
  void ResetPeak() override { tessera::worker::ResetPeak(device_); }

 private:
  static double Now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  torch::Device device_;
};

}  // namespace

std::unique_ptr<ProfileMeter> MakeDeviceProfileMeter(const torch::Device& device) {
  if (device.is_cuda()) return std::make_unique<CudaProfileMeter>(device);
  return MakeCpuProfileMeter();
}

}  // namespace tessera::worker
