// The simulator's clusters (bench/sched/README.md).
#include "bench/sched/clusters.h"

#include <array>

#include "bench/sched/trace.h"

namespace tessera::scheduler::sim {

namespace {

Device Gpu(int index, const std::string& type, double mem_gib, double tflops) {
  Device d;
  d.index = index;
  d.type = type;
  d.memory_bytes = static_cast<int64_t>(mem_gib * kGiB);
  d.tflops = tflops;
  return d;
}

// GPUs of three types in 4-GPU boxes, `boxes[t]` boxes of type t, by
// throughput and memory relative to an A100-like 19.5 TFLOPS / 80 GiB:
// V100-like 0.8 x / 32 GiB, T4-like 0.4 x / 16 GiB; PCIe in a box,
// 25 Gbit/s between boxes.
Cluster MixedCluster(std::string name, std::string about, const std::array<int, 3>& boxes) {
  Cluster c{std::move(name), std::move(about), {}};
  struct Type {
    const char* name;
    double relative;
    double mem_gib;
  };
  const Type types[] = {{"a100", 1.0, 80}, {"v100", 0.8, 32}, {"t4", 0.4, 16}};
  for (size_t t = 0; t < 3; ++t) {
    for (int box = 0; box < boxes[t]; ++box) {
      Node nd;
      nd.name = std::string(types[t].name) + "-" + std::to_string(box);
      nd.network = Link{25e9 / 8, 20e-6};
      for (int i = 0; i < 4; ++i) {
        nd.devices.push_back(Gpu(i, types[t].name, types[t].mem_gib, 19.5 * types[t].relative));
      }
      c.snapshot.nodes.push_back(std::move(nd));
    }
  }
  return c;
}

}  // namespace

// examples/demo-lab: boxa 2 x A100-80GB (speed 0.5), boxb 1 x RTX4090-24GB
// (0.4), boxc 2 x GTX1080-8GB (0.175), with the declared memory. The speeds
// are units of one host core; here one unit is 39 TFLOPS, so the A100 has an
// A100's 19.5. The nodes' links are the planner's defaults (PCIe, 10 GbE).
Cluster DemoLab() {
  constexpr double kTflopsPerSpeed = 39;
  Cluster c{"demo-lab", "examples/demo-lab: 2 A100 (80 GiB), 1 RTX4090 (24), 2 GTX1080 (8)", {}};
  auto node = [&](const std::string& name, const std::string& type, int n, double mem_gib,
                  double speed) {
    Node nd;
    nd.name = name;
    for (int i = 0; i < n; ++i)
      nd.devices.push_back(Gpu(i, type, mem_gib, speed * kTflopsPerSpeed));
    c.snapshot.nodes.push_back(std::move(nd));
  };
  node("boxa", "A100-80GB", 2, 80, 0.5);
  node("boxb", "RTX4090-24GB", 1, 24, 0.4);
  node("boxc", "GTX1080-8GB", 2, 8, 0.175);
  return c;
}

// 24 GPUs: two boxes of each type.
Cluster Mixed24() {
  return MixedCluster("mixed-24",
                      "8 A100-like (19.5 TFLOPS, 80 GiB), 8 V100-like (15.6, 32), "
                      "8 T4-like (7.8, 16), 4 a box, 25 Gbit/s",
                      {2, 2, 2});
}

// 64 GPUs for the round-time check: 16 boxes of 4 (6 A100-like, 5 V100-like,
// 5 T4-like).
Cluster Mixed64() {
  return MixedCluster("mixed-64", "16 boxes of 4: 6 A100-like, 5 V100-like, 5 T4-like", {6, 5, 5});
}

}  // namespace tessera::scheduler::sim
