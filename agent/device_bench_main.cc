// tessera-device-bench: measures one device (agent/device_benchmark.h) and
// prints the figures as one JSON line (agent/benchmark_child.h). The agent runs
// it as a child process, so the agent links no LibTorch and keeps no CUDA
// context; the CUDA context and cached memory of a benchmark end with it.
//
// Usage: tessera-device-bench --device cuda:0 [--matmul-ms 250] [--copy-ms 150]
#include <CLI/CLI.hpp>
#include <cstdio>

#include "agent/benchmark_child.h"
#include "agent/device_benchmark.h"

int main(int argc, char** argv) {
  using namespace tessera;
  using namespace tessera::agent;
  // cuda:<i> is NVML's device i (the agent numbers GPUs by PCI bus id too).
  UsePciBusIdDeviceOrder();
  CLI::App app{"tessera-device-bench: one device's sustained matmul and copy throughput"};
  std::string device = "cpu";
  int matmul_ms = 250;
  int copy_ms = 150;
  int64_t cpu_matmul_size = 512;
  app.add_option("--device", device, "cpu or cuda:<i>")->required();
  app.add_option("--matmul-ms", matmul_ms, "time per matmul dtype")->check(CLI::PositiveNumber);
  app.add_option("--copy-ms", copy_ms, "time for the copy")->check(CLI::PositiveNumber);
  app.add_option("--cpu-matmul-size", cpu_matmul_size, "n of the CPU's n x n matrices")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  BenchmarkOptions options;
  options.matmul_budget = std::chrono::milliseconds(matmul_ms);
  options.copy_budget = std::chrono::milliseconds(copy_ms);
  options.cpu_matmul_size = cpu_matmul_size;
  Result<BenchmarkFigures> figures = RunDeviceBenchmark(device, options);
  if (!figures.ok()) {
    std::printf("%s\n", ErrorToJsonLine(figures.status()).c_str());
    return 1;
  }
  std::printf("%s\n", FiguresToJsonLine(*figures).c_str());
  return 0;
}
