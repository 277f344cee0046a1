#include "agent/device_benchmark.h"

#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <exception>

namespace tessera::agent {
namespace {

void Synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

// Runs `step` repeatedly for at least `budget` (after `warmup` calls),
// synchronising every `per_sync` calls; returns seconds per call.
template <typename Step>
double SecondsPerCall(const torch::Device& device, std::chrono::milliseconds budget, int per_sync,
                      Step step) {
  for (int i = 0; i < 2; ++i) step();
  Synchronize(device);
  int64_t calls = 0;
  const auto start = std::chrono::steady_clock::now();
  std::chrono::duration<double> elapsed{0};
  do {
    for (int i = 0; i < per_sync; ++i) step();
    calls += per_sync;
    Synchronize(device);
    elapsed = std::chrono::steady_clock::now() - start;
  } while (elapsed < budget);
  return elapsed.count() / static_cast<double>(calls);
}

// Sustained n x n matmul TFLOPS at `dtype`; 0 when the device has no kernel for it.
double MatmulTflops(const torch::Device& device, torch::ScalarType dtype, int64_t n,
                    const BenchmarkOptions& options, int per_sync) {
  auto opts = torch::TensorOptions().dtype(dtype).device(device);
  torch::Tensor a, b, c;
  try {
    a = torch::randn({n, n}, opts);
    b = torch::randn({n, n}, opts);
    c = torch::empty({n, n}, opts);
    torch::mm_out(c, a, b);  // throws for a dtype without a kernel here
  } catch (const c10::Error&) {
    return 0.0;
  }
  const double s =
      SecondsPerCall(device, options.matmul_budget, per_sync, [&] { torch::mm_out(c, a, b); });
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / s / 1e12;
}

}  // namespace

Result<BenchmarkFigures> RunDeviceBenchmark(const std::string& device_name,
                                            const BenchmarkOptions& options) {
  try {
    torch::Device device(device_name);
    if (device.is_cuda()) {
      if (!torch::cuda::is_available()) {
        return Unavailable("CUDA is not available to LibTorch (no GPU or no driver on this node)");
      }
      if (device.index() >= static_cast<int>(torch::cuda::device_count())) {
        return NotFound(device_name + ": CUDA sees " + std::to_string(torch::cuda::device_count()) +
                        " GPU(s)");
      }
    }
    torch::NoGradGuard no_grad;
    const bool gpu = device.is_cuda();
    const int per_sync = gpu ? std::max(1, options.calls_per_sync) : 1;
    const int64_t n = gpu ? options.gpu_matmul_size : options.cpu_matmul_size;
    BenchmarkFigures out;
    out.tflops = MatmulTflops(device, torch::kFloat32, n, options, per_sync);
    if (out.tflops <= 0) return Internal("no float32 matmul on " + device_name);
    out.tflops_fp16 = MatmulTflops(device, torch::kFloat16, n, options, per_sync);
    out.tflops_bf16 = MatmulTflops(device, torch::kBFloat16, n, options, per_sync);
    out.tflops_half = std::max(out.tflops_fp16, out.tflops_bf16);

    const int64_t bytes = gpu ? options.gpu_copy_bytes : options.cpu_copy_bytes;
    const int64_t elements = bytes / static_cast<int64_t>(sizeof(float));
    auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(device);
    torch::Tensor src = torch::ones({elements}, opts);
    torch::Tensor dst = torch::empty({elements}, opts);
    const double copy_s =
        SecondsPerCall(device, options.copy_budget, per_sync, [&] { dst.copy_(src); });
    // A copy reads and writes every byte once.
    out.mem_bandwidth_gbps = 2.0 * static_cast<double>(elements * sizeof(float)) / copy_s / 1e9;
    return out;
  } catch (const std::exception& e) {
    return Internal(std::string("device benchmark on ") + device_name + " failed: " + e.what());
  }
}

}  // namespace tessera::agent
