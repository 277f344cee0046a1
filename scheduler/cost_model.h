// CostModel: predicts step time, memory and communication of a candidate plan.
//
// Purpose: the one cost model used by the planner's search and by the exhaustive
// oracle in the tests, so both rank candidates by the same numbers. Every term is
// documented with its formula in scheduler/README.md ("Cost model").
// A Candidate is a plan in device-table indices: replicas, each an ordered list of
// (device, layer range) stages, a batch per replica, the micro-batch count and the
// schedule. Evaluate() checks it (coverage, distinct devices, memory) and predicts.
// Ownership: a CostModel copies what it needs from the snapshot/profile/request;
// the inputs may be destroyed after Create().
// Thread safety: immutable after Create(); const methods are safe from any thread.
#ifndef TESSERA_SCHEDULER_COST_MODEL_H_
#define TESSERA_SCHEDULER_COST_MODEL_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "scheduler/cluster_snapshot.h"
#include "scheduler/job_request.h"
#include "scheduler/model_profile.h"
#include "scheduler/plan.h"

namespace tessera::scheduler {

struct CostModelOptions {
  double compute_efficiency = 0.5;           // share of measured matmul TFLOPS layers reach
  double micro_batch_overhead_s = 2e-4;      // per stage per micro-batch (launches, sync)
  int64_t gradient_bucket_bytes = 25 << 20;  // the worker's all-reduce bucket size
  // Times the optimizer step reads and writes a stage's weights (parameters, gradients,
  // optimizer state) per step; divided by the device's memory bandwidth.
  double optimizer_weight_passes = 2.0;
  // Messages per forward activation send (the worker sends a shape header, then the
  // tensors), each paying the link latency; gradients go back in one message.
  int forward_send_messages = 2;
};

// One row of the device table: every device of the snapshot, busy ones included.
struct DeviceInfo {
  DeviceId id;
  int node = 0;         // index into the snapshot's nodes
  int host = 0;         // index into the cost model's machines (nodes sharing one share it)
  int speed_class = 0;  // devices with equal type and throughput share a class
  std::string type;
  int64_t memory_bytes = 0;
  int64_t usable_bytes = 0;  // memory_bytes x (1 - memory_reserve_fraction)
  double model_seconds = 0;  // per sample, whole model, forward (+ backward when training)
  bool busy = false;
  double relative_speed = 1.0;              // Device::relative_speed
  double compute_scale = 1.0;               // Device::compute_scale
  double memory_bandwidth_bytes_per_s = 0;  // 0: no optimizer-step term
  std::string unmeasured_reason;            // Device::unmeasured_reason
};

struct CandidateStage {
  int device = 0;  // index into the device table
  int begin = 0;   // layers [begin, end)
  int end = 0;
};

struct CandidateReplica {
  int64_t batch = 0;
  std::vector<CandidateStage> stages;
};

struct Candidate {
  std::vector<CandidateReplica> replicas;
  int micro_batches = 1;
  Schedule schedule = Schedule::k1F1B;
};

struct Evaluation {
  bool feasible = false;
  std::string reason;  // when infeasible: the first violated constraint, one line
  double step_s = 0;
  double samples_per_s = 0;
  double bubble = 0;
  double comm = 0;
  double allreduce_s = 0;  // visible (not overlapped) part
  double step_end_s = 0;   // optimizer step of the slowest stage + the step-end vote
  int critical_replica = 0;
  int bottleneck_stage = 0;                       // in the critical replica
  std::vector<std::vector<double>> stage_time_s;  // [replica][stage], per micro-batch
  // [replica][stage]: forward and backward of the stage's layers over the whole
  // step (every micro-batch), without sends or overheads: what the worker
  // reports as its rank's compute_s.
  std::vector<std::vector<double>> stage_compute_s;
  std::vector<std::vector<int64_t>> stage_memory_bytes;  // [replica][stage]
};

class CostModel {
 public:
  // REQUIRES: inputs already validated (the planner validates them).
  static CostModel Create(const ClusterSnapshot& cluster, const ModelProfile& model,
                          const JobRequest& request, const CostModelOptions& options = {});

  int num_devices() const { return static_cast<int>(devices_.size()); }
  int num_layers() const { return num_layers_; }
  const DeviceInfo& device(int i) const { return devices_[i]; }
  bool training() const { return training_; }
  // ModelProfile::data_parallel_only: candidates with a multi-stage replica are infeasible.
  bool data_parallel_only() const { return data_parallel_only_; }
  const CostModelOptions& options() const { return options_; }
  int64_t global_batch() const { return global_batch_; }
  // Training: the most micro-batches a step may have (0: no limit); 0 when inferring.
  int max_micro_batches() const { return max_micro_batches_; }

  // Seconds per micro-batch of layers [begin, end) on a device that do not depend on the
  // micro-batch size (measured fixed ms; 0 without them), forward (+ backward when training).
  double FixedSeconds(int dev, int begin, int end) const {
    const auto& p = FixedPrefix(dev);
    return p[end] - p[begin];
  }
  // Per-sample seconds of layers [begin, end) on a device. Backward is 0 for inference.
  double ForwardSeconds(int dev, int begin, int end) const;
  double BackwardSeconds(int dev, int begin, int end) const;
  double ComputeSeconds(int dev, int begin, int end) const {
    return ForwardSeconds(dev, begin, end) + BackwardSeconds(dev, begin, end);
  }
  // Parameter bytes of layers [begin, end) (= gradient bytes).
  double ParameterBytes(int begin, int end) const;
  // Parameters + gradients + optimizer state when training; parameters when inferring.
  double WeightBytes(int begin, int end) const;
  // WeightBytes, plus, when training layers that other replicas hold too, the
  // gradient buckets the worker all-reduces them in (worker/runtime/grad_reducer.h:
  // a flat copy of every replicated parameter's gradient, kept for the whole run).
  double ReplicaWeightBytes(int begin, int end, bool replicated) const;
  // Training: activation bytes kept per sample (the layers' and the stage input's);
  // inference: max over layers of in + out.
  double ActivationBytesPerSample(int begin, int end) const;
  // Bytes per sample leaving layer `layer` for layer + 1.
  double OutputBytes(int layer) const { return out_[layer] * pixel_scale_; }
  // Bytes per sample entering layer `layer` (its input; layer 0: the model's input).
  double InputBytes(int layer) const { return in_[layer] * pixel_scale_; }
  // Training: backward working bytes per sample of layer `layer` (0 when unknown).
  double TransientBytes(int layer) const { return transient_[layer] * pixel_scale_; }
  // Inference working set of one layer per sample: input + output bytes.
  double LayerIoBytes(int layer) const { return (in_[layer] + out_[layer]) * pixel_scale_; }

  Link LinkBetween(int a, int b) const;
  // Messages of one 1F1B round trip between adjacent stages on devices a (before) and
  // b, cut after layer boundary - 1, per micro-batch of `micro` samples: the gradient
  // message back and the forward_send_messages activation messages, each paying the
  // link's latency, plus the bytes both ways.
  double RoundTripMessageSeconds(int a, int b, int boundary, double micro) const;
  // Replica time: fill and drain (sum of stage times) + (M - 1) beats; a beat is the
  // slowest stage or the slowest 1F1B round-trip cycle (`cycle_s`, may be empty).
  static double ReplicaSeconds(const std::vector<double>& stage_s,
                               const std::vector<double>& cycle_s, int micro_batches);

  // Raw prefix sums for inner loops (index l: sum over layers [0, l)), already
  // scaled: ComputePrefix(dev)[e] - ComputePrefix(dev)[b] == ComputeSeconds(dev, b, e),
  // WeightPrefix() likewise for WeightBytes and (training) ActivationPrefix() for
  // ActivationBytesPerSample.
  const std::vector<double>& ComputePrefix(int dev) const {
    return compute_prefix_[devices_[dev].speed_class];
  }
  const std::vector<double>& FixedPrefix(int dev) const {
    return fixed_prefix_[devices_[dev].speed_class];
  }
  const std::vector<double>& WeightPrefix() const { return weight_prefix_; }
  const std::vector<double>& ParameterPrefix() const { return param_prefix_; }
  const std::vector<double>& ActivationPrefix() const { return act_scaled_prefix_; }

  // Seconds one stage spends on one micro-batch of `micro` samples: compute, the
  // forward send to `next` and (training) the gradient send to `prev`, plus the
  // per-micro-batch overhead. next / prev are device indices or -1.
  double StageSeconds(int dev, int begin, int end, double micro, int next, int prev) const;
  // Micro-batches whose activations a stage holds at once.
  static int InFlight(Schedule schedule, int micro_batches, int stages, int stage);
  // Peak bytes of a stage holding `in_flight` micro-batches of `micro_ceil` samples; when
  // training, plus one micro-batch's backward working set (the largest layer transient)
  // and max(2, in_flight) micro-batches of gradients sent to the previous stage.
  // replicated: other replicas hold the same layers (ReplicaWeightBytes).
  double StageMemoryBytes(int begin, int end, int64_t micro_ceil, int in_flight,
                          bool replicated = false) const;

  // Ring all-reduce of `bytes` over `participants`: 2(N-1)/N x bytes / bw + 2(N-1) x latency.
  static double RingAllReduceSeconds(double bytes, int participants, const Link& slowest);
  // The shortest hop the candidate's ranks can make for the CPU their collectives
  // cost (Node::collective_cpu_per_hop_s): the largest, over the machines its
  // ranks run on, of ranks there x CPU per hop / the machine's cores; 0 where
  // nothing is known.
  double CollectiveCpuHopSeconds(const Candidate& candidate) const;
  // Seconds of the optimizer step over layers [begin, end) on a device: the profile's
  // measured step for the device's type at its relative speed when every layer has
  // one, else optimizer_weight_passes x weight bytes over its memory bandwidth (0
  // without bandwidth, and when inferring).
  double OptimizerSeconds(int dev, int begin, int end) const;
  // Seconds a replica of layers [begin, end) spends per step copying their gradients
  // into the all-reduce buckets and the sums back (worker/runtime/grad_reducer.h): the
  // profile's measurement at the device's relative speed when every layer has one,
  // else two copies (each read and written) of the parameter bytes over memory
  // bandwidth; 0 without either, and when inferring.
  double GradientCopySeconds(int dev, int begin, int end) const;

  // Checks and predicts one candidate. Never fails: infeasible candidates come
  // back with feasible == false and a reason.
  Evaluation Evaluate(const Candidate& candidate) const;

  // Tiled inference helpers: per-tile forward seconds on a device and per-tile
  // activation bytes for a square tile of `tile_px`.
  double TileSeconds(int dev, int tile_px) const;
  double TileActivationBytes(int tile_px) const;
  double NominalPixels() const;

 private:
  // A step-end term: the measured prefix's range when every layer has a measurement,
  // else bytes_moved over the device's memory bandwidth (0 without; 0 when inferring).
  double StepEndSeconds(const std::vector<std::vector<double>>& measured_prefix, int dev, int begin,
                        int end, double bytes_moved) const;
  double LayerForward(int cls, int layer) const;

  bool training_ = true;
  int num_layers_ = 0;
  int64_t global_batch_ = 0;
  double pixel_scale_ = 1;  // (image pixels) / (nominal pixels)
  double weight_multiplier_ = 1;
  int nominal_px_ = 256;
  bool data_parallel_only_ = false;
  int max_micro_batches_ = 0;  // training only; 0: no limit
  CostModelOptions options_;
  std::vector<DeviceInfo> devices_;
  // Per speed class: prefix sums of nominal per-sample forward/backward seconds.
  std::vector<std::vector<double>> fwd_prefix_;
  std::vector<std::vector<double>> bwd_prefix_;
  std::vector<std::vector<double>> compute_prefix_;    // scaled fwd (+ bwd when training)
  std::vector<std::vector<double>> optimizer_prefix_;  // per speed class; NaN: not measured
  std::vector<std::vector<double>> grad_copy_prefix_;  // likewise
  std::vector<std::vector<double>> fixed_prefix_;      // per micro-batch fwd (+ bwd)
  std::vector<double> weight_prefix_;
  std::vector<double> act_scaled_prefix_;
  std::vector<double> param_prefix_;
  std::vector<double> act_prefix_;
  std::vector<double> out_;        // nominal output bytes per layer
  std::vector<double> in_;         // nominal input bytes per layer
  std::vector<double> transient_;  // nominal backward working bytes per layer
  std::vector<double> bn_prefix_;  // synchronised batch norms in layers [0, l)
  // Links: node x node matrix (diagonal: the node's internal link) and device-pair overrides.
  int num_nodes_ = 0;
  std::vector<Link> node_links_;
  std::unordered_map<int64_t, Link> device_links_;
  // Machines (Node::host; a node without one is its own): cores and CPU per hop.
  struct Host {
    int cores = 0;
    double cpu_per_hop_s = 0;
  };
  std::vector<Host> hosts_;
};

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_COST_MODEL_H_
