// Device benchmark: a device's sustained matrix-multiply throughput at 32- and
// 16-bit float (TFLOPS) and its memory bandwidth (GB/s), measured through
// LibTorch in about a second, so the planner sizes work by measured speed
// rather than by name.
//
// Sustained: each figure is calls per second over a time budget after a
// warm-up, with matrices large enough that a GPU runs its kernels at its
// working clock (launch overhead is noise at n = 4096) and the copy much larger
// than any cache. The device is synchronised every few calls, not after each, so
// the queue stays full as in training. 16-bit is the faster of fp16 and bf16
// (mixed-precision training uses one of them); a dtype the device cannot
// multiply (fp16 on most CPUs) reads 0.
//
// This header is torch-free; device_benchmark.cc is the agent's only LibTorch
// translation unit. "cuda:<i>" on a machine without a usable GPU returns
// kUnavailable (no CUDA) or kNotFound (no such index), with the reason.
// Thread safety: one benchmark at a time per process (it uses all cores).
#ifndef TESSERA_AGENT_DEVICE_BENCHMARK_H_
#define TESSERA_AGENT_DEVICE_BENCHMARK_H_

#include <chrono>
#include <functional>
#include <string>

#include "common/status.h"

namespace tessera::agent {

struct BenchmarkFigures {
  double tflops = 0.0;              // sustained float32 matmul throughput
  double tflops_half = 0.0;         // max(tflops_fp16, tflops_bf16); 0: neither runs
  double tflops_fp16 = 0.0;         // 0 when the device cannot multiply fp16
  double tflops_bf16 = 0.0;         // 0 when the device cannot multiply bf16
  double mem_bandwidth_gbps = 0.0;  // bytes read + written per second / 1e9
};

struct BenchmarkOptions {
  // Time spent on each matmul dtype and on the copy (after a warm-up).
  std::chrono::milliseconds matmul_budget{250};
  std::chrono::milliseconds copy_budget{150};
  // n of the n x n matrices and size of the copied tensor, per kind of device.
  int64_t cpu_matmul_size = 512;
  int64_t gpu_matmul_size = 4096;
  int64_t cpu_copy_bytes = int64_t{64} << 20;
  int64_t gpu_copy_bytes = int64_t{1} << 30;
  // Calls between two synchronisations of a GPU.
  int calls_per_sync = 8;
};

// device: "cpu" or "cuda:<i>". LibTorch exceptions become a Status.
// Defined in the separate library tessera_agent_benchmark, linked only into
// tessera-device-bench (the agent runs it as a child, benchmark_child.h).
Result<BenchmarkFigures> RunDeviceBenchmark(const std::string& device,
                                            const BenchmarkOptions& options = {});

// CUDA numbers GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID; NVML
// numbers them by PCI bus id. The benchmark runs "cuda:<NVML index>", so the
// agent sets PCI_BUS_ID (overriding any other value) first thing in main, and
// its benchmark children (benchmark_child.h) and workers (launch/worker_env.h) inherit
// it; tessera-device-bench sets it too. Defined in benchmark_child.cc, which
// links no LibTorch.
void UsePciBusIdDeviceOrder();

// How the inventory measures a device ("cpu", "cuda:<i>"); tests inject fakes.
using DeviceBenchmarkFn = std::function<Result<BenchmarkFigures>(const std::string& device)>;

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_DEVICE_BENCHMARK_H_
