// tessera-device-bench: measures one device (agent/device_benchmark.h) and
// prints the figures as one JSON line (agent/benchmark_child.h). The agent runs
// it as a child process, so the agent links no LibTorch and keeps no CUDA
// context; the CUDA context and cached memory of a benchmark end with it.
//
// Usage: tessera-device-bench --device cuda:0 [--matmul-ms 250] [--copy-ms 150]
//        tessera-device-bench --gloo-link   (agent/gloo_link_benchmark.h: the
//        loopback Gloo link, printed as {"bandwidth_bytes_per_s":..,"latency_s":..,
//        "cpu_per_hop_s":..})
#include <signal.h>
#include <sys/wait.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "agent/benchmark_child.h"
#include "agent/device_benchmark.h"
#include "agent/gloo_link_benchmark.h"
#include "common/process_launcher.h"

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
  bool gloo_link = false;
  int peer_port = 0;
  app.add_option("--gloo-link-peer", peer_port, "(internal) the --gloo-link run's second rank")
      ->check(CLI::Range(1, 65535));
  auto* device_opt = app.add_option("--device", device, "cpu or cuda:<i>");
  auto* link_opt =
      app.add_flag("--gloo-link", gloo_link, "measure this machine's loopback Gloo link");
  device_opt->excludes(link_opt);
  app.add_option("--matmul-ms", matmul_ms, "time per matmul dtype")->check(CLI::PositiveNumber);
  app.add_option("--copy-ms", copy_ms, "time for the copy")->check(CLI::PositiveNumber);
  app.add_option("--cpu-matmul-size", cpu_matmul_size, "n of the CPU's n x n matrices")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (peer_port > 0) {
    Status s = RunGlooLinkPeer(peer_port);
    if (!s.ok()) std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return s.ok() ? 0 : 1;
  }
  if (!gloo_link && device_opt->count() == 0) {
    std::fprintf(stderr, "--device or --gloo-link is required\n");
    return 2;
  }
  if (gloo_link) {
    // The second rank: this program again, in its own process, gone with this one.
    pid_t peer = -1;
    auto start_peer = [&](int port) -> Status {
      ProcessSpec spec;
      spec.argv = {BesideThisProgram("tessera-device-bench"), "--gloo-link-peer",
                   std::to_string(port)};
      spec.stdin_from = ChildStdio::Null();
      spec.stdout_to = ChildStdio::Null();
      spec.parent_death_signal = SIGKILL;
      TESSERA_ASSIGN_OR_RETURN(peer, ProcessLauncher::Default()->Launch(spec));
      return Status::Ok();
    };
    Result<LinkFigures> link = RunGlooLinkBenchmark(start_peer);
    if (peer > 0) {
      if (!link.ok()) ::kill(peer, SIGKILL);
      ::waitpid(peer, nullptr, 0);
    }
    if (!link.ok()) {
      std::printf("%s\n", ErrorToJsonLine(link.status()).c_str());
      return 1;
    }
    std::printf("%s\n", LinkToJsonLine(*link).c_str());
    return 0;
  }
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
