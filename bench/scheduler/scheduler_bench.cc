// Plan-time benchmarks: 64 devices of 4 types x 100 layers (target <= 50 ms) and
// 1,024 devices (target <= 2 s). Build in Release:
//   cmake -S . -B build-sched-rel -G Ninja -DCMAKE_BUILD_TYPE=Release
//   ninja -C build-sched-rel -j2 scheduler_bench && build-sched-rel/bench/scheduler/scheduler_bench
#include <benchmark/benchmark.h>

#include <string>

#include "scheduler/builtin_profiles.h"
#include "scheduler/planner.h"

namespace tessera::scheduler {
namespace {

struct GpuType {
  const char* name;
  double mem_gb;
  double tflops;
};
constexpr GpuType kTypes[] = {
    {"A100-80GB", 80, 19.5}, {"RTX-4090", 24, 82}, {"V100-16GB", 16, 15.7}, {"T4-16GB", 16, 8.1}};

// `devices` devices on nodes of 8; each node holds one type (types rotate by node).
ClusterSnapshot MakeCluster(int devices) {
  ClusterSnapshot c;
  const int per_node = 8;
  for (int n = 0; n * per_node < devices; ++n) {
    Node node;
    node.name = "node";
    node.name += std::to_string(n);
    node.network = Link{(n % 2 ? 10.0 : 100.0) * 1e9 / 8, 50e-6};
    const GpuType& t = kTypes[n % 4];
    for (int i = 0; i < per_node && n * per_node + i < devices; ++i) {
      Device d;
      d.index = i;
      d.type = t.name;
      d.memory_bytes = static_cast<int64_t>(t.mem_gb * 1e9);
      d.tflops = t.tflops;
      d.memory_bandwidth_bytes_per_s = 900e9;
      node.devices.push_back(d);
    }
    c.nodes.push_back(std::move(node));
  }
  return c;
}

ModelProfile MakeModel(int layers) {
  ModelProfile m;
  m.name = "synthetic";
  m.input_bytes = 1 << 20;
  for (int l = 0; l < layers; ++l) {
    Layer layer;
    layer.name = "l";
    layer.name += std::to_string(l);
    layer.forward_flops = (1.0 + (l % 7)) * 2e9;
    layer.parameter_bytes = (5 + (l % 11) * 7) * 1000000LL;
    layer.activation_bytes = (40 - (l * 30 / layers)) * 1000000LL;
    layer.output_bytes = (8 - (l * 6 / layers)) * 1000000LL;
    m.layers.push_back(layer);
  }
  return m;
}

void BM_Plan(benchmark::State& state) {
  const ClusterSnapshot cluster = MakeCluster(static_cast<int>(state.range(0)));
  const ModelProfile model = MakeModel(static_cast<int>(state.range(1)));
  JobRequest req;
  req.global_batch = 1024;
  for (auto _ : state) {
    auto plans = MakePlans(cluster, model, req);
    if (!plans.ok()) state.SkipWithError(plans.status().ToString().c_str());
    benchmark::DoNotOptimize(plans);
  }
  state.SetLabel(std::to_string(state.range(0)) + " devices x " + std::to_string(state.range(1)) +
                 " layers");
}
BENCHMARK(BM_Plan)
    ->Args({8, 24})
    ->Args({64, 100})
    ->Args({1024, 100})
    ->Unit(benchmark::kMillisecond);

void BM_PlanBuiltin(benchmark::State& state) {
  const ClusterSnapshot cluster = MakeCluster(64);
  const ModelProfile model = BuiltinProfile("colorize-unet").value();
  JobRequest req;
  req.global_batch = 256;
  for (auto _ : state) {
    auto plans = MakePlans(cluster, model, req);
    benchmark::DoNotOptimize(plans);
  }
}
BENCHMARK(BM_PlanBuiltin)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessera::scheduler

BENCHMARK_MAIN();
