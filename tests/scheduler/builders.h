// Test fixtures for the scheduler: builders for clusters, models and requests.
#ifndef TESSERA_TESTS_SCHEDULER_BUILDERS_H_
#define TESSERA_TESTS_SCHEDULER_BUILDERS_H_

#include <string>
#include <utility>
#include <vector>

#include "scheduler/cluster_snapshot.h"
#include "scheduler/job_request.h"
#include "scheduler/model_profile.h"

namespace tessera::scheduler::testing {

constexpr double kGB = 1e9;

// `count` identical GPUs.
struct GpuGroup {
  int count;
  std::string type;
  double mem_gb;
  double tflops;
  bool busy = false;
};

class ClusterBuilder {
 public:
  // Starts a new node; later Gpu() calls add to it.
  ClusterBuilder& Node(std::string name, double network_gbps = 10, double intra_gb_s = 16) {
    scheduler::Node n;
    n.name = std::move(name);
    n.network = Link{network_gbps * 1e9 / 8, 50e-6};
    n.intra_node = Link{intra_gb_s * 1e9, 10e-6};
    snap_.nodes.push_back(std::move(n));
    return *this;
  }
  ClusterBuilder& Gpu(std::string type, double mem_gb, double tflops, bool busy = false) {
    auto& devs = snap_.nodes.back().devices;
    Device d;
    d.index = static_cast<int>(devs.size());
    d.type = std::move(type);
    d.memory_bytes = static_cast<int64_t>(mem_gb * kGB);
    d.tflops = tflops;
    d.busy = busy;
    devs.push_back(std::move(d));
    return *this;
  }
  ClusterBuilder& Gpus(int n, const std::string& type, double mem_gb, double tflops) {
    return Gpus(GpuGroup{n, type, mem_gb, tflops});
  }
  ClusterBuilder& Gpus(const GpuGroup& g) {
    for (int i = 0; i < g.count; ++i) Gpu(g.type, g.mem_gb, g.tflops, g.busy);
    return *this;
  }
  // Sets the collective backend ("nccl", "gloo") of every device of the current node.
  ClusterBuilder& Backend(const std::string& backend) {
    for (Device& d : snap_.nodes.back().devices) d.backend = backend;
    return *this;
  }
  // The current node runs on machine `host` of `cores` cores, whose ranks spend
  // `cpu_per_hop_s` of CPU on each hop of a small collective.
  ClusterBuilder& Host(const std::string& host, int cores, double cpu_per_hop_s) {
    scheduler::Node& n = snap_.nodes.back();
    n.host = host;
    n.host_cores = cores;
    n.collective_cpu_per_hop_s = cpu_per_hop_s;
    return *this;
  }
  // NVLink between two devices of the current node.
  ClusterBuilder& NvLink(int a, int b, double gb_s = 150) {
    const std::string& node = snap_.nodes.back().name;
    snap_.device_links.push_back(DeviceLink{{node, a}, {node, b}, Link{gb_s * 1e9, 5e-6}});
    return *this;
  }
  ClusterSnapshot Build() const { return snap_; }

 private:
  ClusterSnapshot snap_;
};

class ModelBuilder {
 public:
  explicit ModelBuilder(std::string name = "test-model") { model_.name = std::move(name); }
  // n layers, each with forward GFLOPs, parameter MB, kept-activation MB and output MB per sample.
  ModelBuilder& Layers(int n, double gflops, double param_mb, double act_mb, double out_mb) {
    for (int i = 0; i < n; ++i) {
      Layer l;
      l.name = "l" + std::to_string(model_.layers.size());
      l.forward_flops = gflops * 1e9;
      l.parameter_bytes = static_cast<int64_t>(param_mb * 1e6);
      l.activation_bytes = static_cast<int64_t>(act_mb * 1e6);
      l.output_bytes = static_cast<int64_t>(out_mb * 1e6);
      model_.layers.push_back(std::move(l));
    }
    return *this;
  }
  ModelBuilder& Input(double mb) {
    model_.input_bytes = static_cast<int64_t>(mb * 1e6);
    return *this;
  }
  ModelBuilder& Halo(int px) {
    model_.halo_px = px;
    return *this;
  }
  ModelProfile Build() const { return model_; }

 private:
  ModelProfile model_;
};

// 12 layers (unless told otherwise) of 2 GFLOPs, 20 MB parameters, 10 MB kept activations
// and 4 MB output per sample, 1 MB input.
inline ModelProfile MediumModel(int layers = 12) {
  return ModelBuilder().Input(1).Layers(layers, 2, 20, 10, 4).Build();
}

// Node "a" with the GPUs of `a`, node "b" with those of `b`, both on a network of
// `network_gbps`.
inline ClusterSnapshot TwoNodes(const GpuGroup& a, const GpuGroup& b, double network_gbps = 10) {
  return ClusterBuilder().Node("a", network_gbps).Gpus(a).Node("b", network_gbps).Gpus(b).Build();
}

inline JobRequest Train(int64_t batch, Layout layout = Layout::kAuto) {
  JobRequest r;
  r.kind = JobKind::kTrain;
  r.global_batch = batch;
  r.layout = layout;
  return r;
}

inline JobRequest Infer(int64_t batch, Layout layout = Layout::kAuto) {
  JobRequest r = Train(batch, layout);
  r.kind = JobKind::kInfer;
  return r;
}

}  // namespace tessera::scheduler::testing

#endif  // TESSERA_TESTS_SCHEDULER_BUILDERS_H_
