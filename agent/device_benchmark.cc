#include "agent/device_benchmark.h"

#include <torch/torch.h>

#include <cstdlib>
#include <exception>

namespace tessera::agent {
namespace {

void Synchronize(const torch::Device& device) {
#ifdef TESSERA_HAVE_CUDA_TORCH
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
#else
  (void)device;
#endif
}

// Runs `step` repeatedly for at least `budget` (after one warm-up call);
// returns seconds per call.
template <typename Step>
double SecondsPerCall(const torch::Device& device, std::chrono::milliseconds budget, Step step) {
  step();
  Synchronize(device);
  int64_t calls = 0;
  auto start = std::chrono::steady_clock::now();
  std::chrono::duration<double> elapsed{0};
  do {
    step();
    ++calls;
    if (calls % 4 == 0 || device.is_cuda()) Synchronize(device);
    elapsed = std::chrono::steady_clock::now() - start;
  } while (elapsed < budget);
  Synchronize(device);
  elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / static_cast<double>(calls);
}

}  // namespace

void UsePciBusIdDeviceOrder() { ::setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", /*overwrite=*/1); }

Result<BenchmarkFigures> RunDeviceBenchmark(const std::string& device_name,
                                            const BenchmarkOptions& options) {
  try {
    torch::Device device(device_name);
    if (device.is_cuda()) {
#ifdef TESSERA_HAVE_CUDA_TORCH
      if (!torch::cuda::is_available()) return Unavailable("CUDA is not available to LibTorch");
#else
      return Unimplemented("this build of tessera-agent has no CUDA LibTorch");
#endif
    }
    torch::NoGradGuard no_grad;
    auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(device);
    BenchmarkFigures out;

    const int64_t n = options.matmul_size;
    torch::Tensor a = torch::randn({n, n}, opts);
    torch::Tensor b = torch::randn({n, n}, opts);
    torch::Tensor c = torch::empty({n, n}, opts);
    double matmul_s =
        SecondsPerCall(device, options.matmul_budget, [&] { torch::mm_out(c, a, b); });
    out.tflops = 2.0 * static_cast<double>(n) * n * n / matmul_s / 1e12;

    const int64_t elements = options.copy_bytes / static_cast<int64_t>(sizeof(float));
    torch::Tensor src = torch::ones({elements}, opts);
    torch::Tensor dst = torch::empty({elements}, opts);
    double copy_s = SecondsPerCall(device, options.copy_budget, [&] { dst.copy_(src); });
    // A copy reads and writes every byte once.
    out.mem_bandwidth_gbps = 2.0 * static_cast<double>(elements * sizeof(float)) / copy_s / 1e9;
    return out;
  } catch (const std::exception& e) {
    return Internal(std::string("device benchmark on ") + device_name + " failed: " + e.what());
  }
}

}  // namespace tessera::agent
