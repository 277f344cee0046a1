// Device benchmark: how fast a device multiplies matrices (TFLOPS) and copies
// memory (GB/s), measured through LibTorch in well under a second, so the
// planner sizes work by measured speed rather than by name.
//
// This header is torch-free; device_benchmark.cc is the agent's only LibTorch
// translation unit. The CUDA path is compiled only with
// TESSERA_HAVE_CUDA_TORCH; without it "cuda:<i>" returns kUnimplemented.
// Thread safety: one benchmark at a time per process (it uses all cores).
#ifndef TESSERA_AGENT_DEVICE_BENCHMARK_H_
#define TESSERA_AGENT_DEVICE_BENCHMARK_H_

#include <chrono>
#include <functional>
#include <string>

#include "common/status.h"

namespace tessera::agent {

struct BenchmarkFigures {
  double tflops = 0.0;              // float32 matmul throughput
  double mem_bandwidth_gbps = 0.0;  // bytes read + written per second / 1e9
};

struct BenchmarkOptions {
  // Time spent on each of the two measurements (after one warm-up round).
  std::chrono::milliseconds matmul_budget{250};
  std::chrono::milliseconds copy_budget{150};
  int64_t matmul_size = 512;              // n of the n x n matrices
  int64_t copy_bytes = 64 * 1024 * 1024;  // size of the copied tensor
};

// device: "cpu" or "cuda:<i>". LibTorch exceptions become a Status.
// Defined in the separate library tessera_agent_benchmark, so that only
// binaries that measure link LibTorch.
Result<BenchmarkFigures> RunDeviceBenchmark(const std::string& device,
                                            const BenchmarkOptions& options = {});

// CUDA numbers GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID; NVML
// numbers them by PCI bus id. The benchmark runs "cuda:<NVML index>" in this
// process, so the agent sets PCI_BUS_ID (overriding any other value) first thing
// in main, before anything initialises CUDA; workers get it through their
// environment (worker_env.h).
void UsePciBusIdDeviceOrder();

// How the inventory measures a device ("cpu", "cuda:<i>"); tests inject fakes.
using DeviceBenchmarkFn = std::function<Result<BenchmarkFigures>(const std::string& device)>;

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_DEVICE_BENCHMARK_H_
