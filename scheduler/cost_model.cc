#include "scheduler/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <tuple>

#include "scheduler/byte_size.h"

namespace tessera::scheduler {

namespace {

constexpr double kUnusableSeconds = 1e9;  // per sample, for a device without throughput

std::string Gb(double bytes) { return FormatBytes(bytes); }

int64_t PairKey(int a, int b) {
  if (a > b) std::swap(a, b);
  return (static_cast<int64_t>(a) << 32) | static_cast<int64_t>(b);
}

}  // namespace

CostModel CostModel::Create(const ClusterSnapshot& cluster, const ModelProfile& model,
                            const JobRequest& request, const CostModelOptions& options) {
  CostModel cm;
  cm.training_ = request.kind == JobKind::kTrain;
  cm.num_layers_ = static_cast<int>(model.layers.size());
  cm.global_batch_ = request.global_batch;
  cm.options_ = options;
  cm.nominal_px_ = model.nominal_image_px;
  cm.data_parallel_only_ = model.data_parallel_only;
  cm.max_micro_batches_ = cm.training_ ? model.max_micro_batches : 0;
  if (request.image) {
    cm.pixel_scale_ = static_cast<double>(request.image->width) * request.image->height /
                      (static_cast<double>(model.nominal_image_px) * model.nominal_image_px);
  }
  cm.weight_multiplier_ = cm.training_ ? 2.0 + model.optimizer_state_multiplier : 1.0;

  const int L = cm.num_layers_;
  cm.param_prefix_.assign(L + 1, 0);
  cm.act_prefix_.assign(L + 1, 0);
  cm.out_.resize(L);
  cm.in_.resize(L);
  cm.transient_.resize(L);
  cm.bn_prefix_.assign(L + 1, 0);
  for (int l = 0; l < L; ++l) {
    const Layer& layer = model.layers[l];
    cm.param_prefix_[l + 1] = cm.param_prefix_[l] + static_cast<double>(layer.parameter_bytes);
    cm.act_prefix_[l + 1] = cm.act_prefix_[l] + static_cast<double>(layer.activation_bytes);
    cm.out_[l] = static_cast<double>(layer.output_bytes);
    cm.transient_[l] = static_cast<double>(layer.backward_transient_bytes);
    cm.bn_prefix_[l + 1] = cm.bn_prefix_[l] + layer.batch_norms;
    cm.in_[l] = l == 0 ? static_cast<double>(model.input_bytes)
                       : static_cast<double>(model.layers[l - 1].output_bytes);
  }

  // Speed classes: devices with equal type and throughput figures.
  std::map<std::tuple<std::string, double, double, double, std::string, double, double>, int>
      classes;
  std::vector<const Device*> class_rep;
  std::map<std::string, int> host_index;
  for (size_t n = 0; n < cluster.nodes.size(); ++n) {
    const Node& node = cluster.nodes[n];
    const std::string host = node.host.empty() ? "node:" + node.name : "host:" + node.host;
    auto [h, new_host] = host_index.emplace(host, static_cast<int>(cm.hosts_.size()));
    if (new_host) cm.hosts_.emplace_back();
    Host& machine = cm.hosts_[h->second];
    machine.cores = std::max(machine.cores, node.host_cores);
    machine.cpu_per_hop_s = std::max(machine.cpu_per_hop_s, node.collective_cpu_per_hop_s);
    for (const Device& d : cluster.nodes[n].devices) {
      auto key = std::make_tuple(d.type, d.tflops, d.tflops_half, d.memory_bandwidth_bytes_per_s,
                                 d.measured_as, d.relative_speed, d.compute_scale);
      auto [it, inserted] = classes.emplace(key, static_cast<int>(class_rep.size()));
      if (inserted) class_rep.push_back(&d);
      DeviceInfo info;
      info.id = DeviceId{cluster.nodes[n].name, d.index};
      info.node = static_cast<int>(n);
      info.host = h->second;
      info.speed_class = it->second;
      info.type = d.type;
      info.memory_bytes = d.memory_bytes;
      info.usable_bytes = static_cast<int64_t>(static_cast<double>(d.memory_bytes) *
                                               (1.0 - request.memory_reserve_fraction));
      info.busy = d.busy;
      info.relative_speed = d.relative_speed;
      info.compute_scale = d.compute_scale;
      info.memory_bandwidth_bytes_per_s = d.memory_bandwidth_bytes_per_s;
      info.unmeasured_reason = d.unmeasured_reason;
      cm.devices_.push_back(std::move(info));
    }
  }

  const double eff = options.compute_efficiency;
  for (const Device* d : class_rep) {
    double tf = d->tflops;
    if (model.precision != Precision::kFp32) tf = d->tflops_half > 0 ? d->tflops_half : 2 * tf;
    const double flops_per_s = tf * 1e12 * eff;
    const double bw = d->memory_bandwidth_bytes_per_s;
    std::vector<double> fwd(L + 1, 0), bwd(L + 1, 0), fixed(L + 1, 0), opt(L + 1, 0),
        copy(L + 1, 0);
    const std::string& measured = d->measured_as.empty() ? d->type : d->measured_as;
    // A time `profile` measured for this device's type (ms), in seconds on this device.
    auto measured_s = [&](const std::map<std::string, double>& ms) -> std::optional<double> {
      auto it = ms.find(measured);
      if (it == ms.end()) return std::nullopt;
      return it->second / 1e3 / d->relative_speed;
    };
    // Per sample: the measured time, else the FLOPs at the device's throughput but no
    // faster than the bytes it moves through memory.
    auto layer_s = [&](std::optional<double> measured_time, double flops, double bytes) {
      if (measured_time) return *measured_time;
      if (flops_per_s <= 0) return kUnusableSeconds;
      const double s = flops / flops_per_s;
      return bw > 0 ? std::max(s, bytes / bw) : s;
    };
    // NaN marks a layer whose optimizer step or gradient copy was not measured for this
    // device's type: OptimizerSeconds / GradientCopySeconds then fall back to memory bandwidth.
    constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();
    for (int l = 0; l < L; ++l) {
      const Layer& layer = model.layers[l];
      const double moved = cm.in_[l] + cm.out_[l];
      const double bflops =
          layer.backward_flops > 0 ? layer.backward_flops : 2 * layer.forward_flops;
      fwd[l + 1] =
          fwd[l] + layer_s(measured_s(layer.measured_forward_ms), layer.forward_flops, moved);
      bwd[l + 1] = bwd[l] + layer_s(measured_s(layer.measured_backward_ms), bflops, 2 * moved);
      // Per-call part: not per sample, so not scaled by the image size.
      double per_call = measured_s(layer.measured_forward_fixed_ms).value_or(0);
      if (cm.training_) per_call += measured_s(layer.measured_backward_fixed_ms).value_or(0);
      fixed[l + 1] = fixed[l] + per_call;
      opt[l + 1] = opt[l] + measured_s(layer.measured_optimizer_ms).value_or(kNotMeasured);
      copy[l + 1] = copy[l] + measured_s(layer.measured_gradient_copy_ms).value_or(kNotMeasured);
    }
    // What observed steps said of this profile on this device type
    // (scheduler/compute_correction.h): every compute term scales alike.
    if (d->compute_scale != 1.0) {
      for (std::vector<double>* v : {&fwd, &bwd, &fixed, &opt, &copy}) {
        for (double& x : *v) x *= d->compute_scale;
      }
    }
    cm.optimizer_prefix_.push_back(std::move(opt));
    cm.grad_copy_prefix_.push_back(std::move(copy));
    cm.fixed_prefix_.push_back(std::move(fixed));
    cm.fwd_prefix_.push_back(std::move(fwd));
    cm.bwd_prefix_.push_back(std::move(bwd));
  }
  for (size_t c = 0; c < cm.fwd_prefix_.size(); ++c) {
    std::vector<double> v(L + 1);
    for (int l = 0; l <= L; ++l) {
      v[l] = (cm.fwd_prefix_[c][l] + (cm.training_ ? cm.bwd_prefix_[c][l] : 0.0)) * cm.pixel_scale_;
    }
    cm.compute_prefix_.push_back(std::move(v));
  }
  cm.weight_prefix_.resize(L + 1);
  cm.act_scaled_prefix_.resize(L + 1);
  for (int l = 0; l <= L; ++l) {
    cm.weight_prefix_[l] = cm.param_prefix_[l] * cm.weight_multiplier_;
    cm.act_scaled_prefix_[l] = cm.act_prefix_[l] * cm.pixel_scale_;
  }
  for (DeviceInfo& info : cm.devices_) {
    info.model_seconds = cm.ComputeSeconds(static_cast<int>(&info - cm.devices_.data()), 0, L);
  }

  // Links.
  const int N = static_cast<int>(cluster.nodes.size());
  cm.num_nodes_ = N;
  cm.node_links_.resize(static_cast<size_t>(N) * N);
  for (int a = 0; a < N; ++a) {
    for (int b = 0; b < N; ++b) {
      const Node& na = cluster.nodes[a];
      const Node& nb = cluster.nodes[b];
      if (a == b) {
        cm.node_links_[a * N + b] = na.intra_node;
      } else {
        cm.node_links_[a * N + b] =
            Link{std::min(na.network.bandwidth_bytes_per_s, nb.network.bandwidth_bytes_per_s),
                 std::max(na.network.latency_s, nb.network.latency_s)};
      }
    }
  }
  std::map<std::string, int> node_index;
  for (int n = 0; n < N; ++n) node_index[cluster.nodes[n].name] = n;
  for (const NodeLink& l : cluster.node_links) {
    auto a = node_index.find(l.a);
    auto b = node_index.find(l.b);
    if (a == node_index.end() || b == node_index.end()) continue;
    cm.node_links_[a->second * N + b->second] = l.link;
    cm.node_links_[b->second * N + a->second] = l.link;
  }
  std::map<DeviceId, int> dev_index;
  for (int i = 0; i < cm.num_devices(); ++i) dev_index[cm.devices_[i].id] = i;
  for (const DeviceLink& l : cluster.device_links) {
    auto a = dev_index.find(l.a);
    auto b = dev_index.find(l.b);
    if (a == dev_index.end() || b == dev_index.end()) continue;
    cm.device_links_[PairKey(a->second, b->second)] = l.link;
  }
  return cm;
}

double CostModel::ForwardSeconds(int dev, int begin, int end) const {
  const auto& p = fwd_prefix_[devices_[dev].speed_class];
  return (p[end] - p[begin]) * pixel_scale_;
}

double CostModel::BackwardSeconds(int dev, int begin, int end) const {
  if (!training_) return 0;
  const auto& p = bwd_prefix_[devices_[dev].speed_class];
  return (p[end] - p[begin]) * pixel_scale_;
}

double CostModel::ParameterBytes(int begin, int end) const {
  return param_prefix_[end] - param_prefix_[begin];
}

double CostModel::WeightBytes(int begin, int end) const {
  return ParameterBytes(begin, end) * weight_multiplier_;
}

double CostModel::ReplicaWeightBytes(int begin, int end, bool replicated) const {
  return WeightBytes(begin, end) + (training_ && replicated ? ParameterBytes(begin, end) : 0.0);
}

double CostModel::ActivationBytesPerSample(int begin, int end) const {
  // The stage's input is held too: a received activation (or the input batch) that
  // the first layer saves for its backward; the profile counts it in no layer.
  if (training_) return (act_prefix_[end] - act_prefix_[begin] + in_[begin]) * pixel_scale_;
  double peak = 0;
  for (int l = begin; l < end; ++l) peak = std::max(peak, in_[l] + out_[l]);
  return peak * pixel_scale_;
}

Link CostModel::LinkBetween(int a, int b) const {
  if (!device_links_.empty()) {
    auto it = device_links_.find(PairKey(a, b));
    if (it != device_links_.end()) return it->second;
  }
  return node_links_[devices_[a].node * num_nodes_ + devices_[b].node];
}

double CostModel::StageSeconds(int dev, int begin, int end, double micro, int next,
                               int prev) const {
  double t = micro * ComputeSeconds(dev, begin, end) + FixedSeconds(dev, begin, end) +
             options_.micro_batch_overhead_s;
  if (next >= 0) {
    const Link l = LinkBetween(dev, next);
    t += options_.forward_send_messages * l.latency_s +
         micro * OutputBytes(end - 1) / l.bandwidth_bytes_per_s;
  }
  if (training_ && prev >= 0) {
    const Link l = LinkBetween(dev, prev);
    t += l.latency_s + micro * OutputBytes(begin - 1) / l.bandwidth_bytes_per_s;
  }
  return t;
}

double CostModel::RoundTripMessageSeconds(int a, int b, int boundary, double micro) const {
  const Link l = LinkBetween(a, b);
  return (options_.forward_send_messages + 1) * l.latency_s +
         2 * micro * OutputBytes(boundary - 1) / l.bandwidth_bytes_per_s;
}

double CostModel::ReplicaSeconds(const std::vector<double>& stage_s,
                                 const std::vector<double>& cycle_s, int micro_batches) {
  double sum = 0, beat = 0;
  for (double t : stage_s) {
    sum += t;
    beat = std::max(beat, t);
  }
  for (double c : cycle_s) beat = std::max(beat, c);
  return sum + (micro_batches - 1) * beat;
}

int CostModel::InFlight(Schedule schedule, int micro_batches, int stages, int stage) {
  if (schedule == Schedule::kGPipe) return micro_batches;
  return std::min(micro_batches, stages - stage);
}

double CostModel::StageMemoryBytes(int begin, int end, int64_t micro_ceil, int in_flight,
                                   bool replicated) const {
  const int held = training_ ? in_flight : 1;
  double bytes = ReplicaWeightBytes(begin, end, replicated) +
                 static_cast<double>(held) * static_cast<double>(micro_ceil) *
                     ActivationBytesPerSample(begin, end);
  if (training_) {
    // One micro-batch's backward working set (its largest layer's) on top, and the
    // gradients sent back to the previous stage until it has received them: the worker
    // frees them once the schedule shows they arrived, at most 2 micro-batches later
    // in 1F1B, at the step's end in GPipe (stage_runner.h).
    double transient = 0;
    for (int l = begin; l < end; ++l) transient = std::max(transient, transient_[l]);
    const double messages = begin > 0 ? std::max(2, in_flight) * in_[begin] : 0;
    bytes += static_cast<double>(micro_ceil) * (transient + messages) * pixel_scale_;
  }
  return bytes;
}

double CostModel::RingAllReduceSeconds(double bytes, int participants, const Link& slowest) {
  if (participants < 2) return 0;
  const double n = participants;
  return 2.0 * (n - 1) / n * bytes / slowest.bandwidth_bytes_per_s +
         2.0 * (n - 1) * slowest.latency_s;
}

double CostModel::CollectiveCpuHopSeconds(const Candidate& c) const {
  std::vector<int> ranks(hosts_.size(), 0);
  for (const CandidateReplica& rep : c.replicas) {
    for (const CandidateStage& st : rep.stages) ++ranks[devices_[st.device].host];
  }
  double hop = 0;
  for (size_t h = 0; h < hosts_.size(); ++h) {
    if (hosts_[h].cores <= 0 || hosts_[h].cpu_per_hop_s <= 0) continue;
    hop = std::max(hop, ranks[h] * hosts_[h].cpu_per_hop_s / hosts_[h].cores);
  }
  return hop;
}

double CostModel::StepEndSeconds(const std::vector<std::vector<double>>& measured_prefix, int dev,
                                 int begin, int end, double bytes_moved) const {
  if (!training_) return 0;
  const std::vector<double>& measured = measured_prefix[devices_[dev].speed_class];
  const double m = measured[end] - measured[begin];
  if (!std::isnan(m)) return m;
  const double bw = devices_[dev].memory_bandwidth_bytes_per_s;
  return bw > 0 ? bytes_moved / bw : 0.0;
}

double CostModel::OptimizerSeconds(int dev, int begin, int end) const {
  return StepEndSeconds(optimizer_prefix_, dev, begin, end,
                        options_.optimizer_weight_passes * WeightBytes(begin, end));
}

double CostModel::GradientCopySeconds(int dev, int begin, int end) const {
  // Two copies, each read and written.
  return StepEndSeconds(grad_copy_prefix_, dev, begin, end, 4 * ParameterBytes(begin, end));
}

Evaluation CostModel::Evaluate(const Candidate& c) const {
  Evaluation ev;
  const int R = static_cast<int>(c.replicas.size());
  const int M = c.micro_batches;
  auto fail = [&ev](std::string reason) {
    ev.feasible = false;
    ev.reason = std::move(reason);
    return ev;
  };
  if (R == 0) return fail("no replicas");
  if (M < 1) return fail("micro-batch count must be at least 1");
  std::vector<char> used(devices_.size(), 0);
  int64_t total_batch = 0;
  for (const CandidateReplica& r : c.replicas) {
    if (r.stages.empty()) return fail("replica without stages");
    if (r.batch < M) {
      return fail("replica batch " + std::to_string(r.batch) + " is smaller than " +
                  std::to_string(M) + " micro-batches");
    }
    total_batch += r.batch;
    int expect = 0;
    for (const CandidateStage& s : r.stages) {
      if (s.device < 0 || s.device >= num_devices()) return fail("unknown device");
      if (used[s.device]) return fail(devices_[s.device].id.ToString() + " used twice");
      used[s.device] = 1;
      if (devices_[s.device].busy) return fail(devices_[s.device].id.ToString() + " is busy");
      if (s.begin != expect || s.end <= s.begin) return fail("stages do not tile the layers");
      expect = s.end;
    }
    if (expect != num_layers_) return fail("stages do not cover every layer");
  }
  if (total_batch != global_batch_) return fail("batch shares do not sum to the global batch");
  if (data_parallel_only_) {
    for (const CandidateReplica& r : c.replicas) {
      if (r.stages.size() > 1) {
        return fail("the model cannot be split into stages (data parallel only)");
      }
    }
  }
  if (max_micro_batches_ > 0 && M > max_micro_batches_) {
    return fail(std::to_string(M) + " micro-batches: the model trains at most " +
                std::to_string(max_micro_batches_) + " a step");
  }

  // Memory: independent of time.
  ev.stage_memory_bytes.resize(R);
  for (int r = 0; r < R; ++r) {
    const CandidateReplica& rep = c.replicas[r];
    const int S = static_cast<int>(rep.stages.size());
    const int64_t micro_ceil = (rep.batch + M - 1) / M;
    for (int s = 0; s < S; ++s) {
      const CandidateStage& st = rep.stages[s];
      const double mem =
          StageMemoryBytes(st.begin, st.end, micro_ceil, InFlight(c.schedule, M, S, s), R > 1);
      const DeviceInfo& d = devices_[st.device];
      if (mem > static_cast<double>(d.usable_bytes)) {
        return fail("doesn't fit on " + d.id.ToString() + ": layers [" + std::to_string(st.begin) +
                    "," + std::to_string(st.end) + ") need " + Gb(mem) + ", " +
                    Gb(static_cast<double>(d.usable_bytes)) + " usable");
      }
      ev.stage_memory_bytes[r].push_back(static_cast<int64_t>(mem));
    }
  }

  // Inference whose replicas are one stage each: every rank leases chunks and
  // runs them at its own pace (worker/runtime/infer_plan.h), with no step to
  // agree on; the job's rate is the sum of its replicas'.
  const bool independent =
      !training_ && std::all_of(c.replicas.begin(), c.replicas.end(),
                                [](const CandidateReplica& r) { return r.stages.size() == 1; });
  // Step-end vote: one tiny all-reduce over every rank, ring in plan order.
  double vote = 0;
  if (!independent) {
    std::vector<int> ranks;
    for (const CandidateReplica& rep : c.replicas) {
      for (const CandidateStage& s : rep.stages) ranks.push_back(s.device);
    }
    const int n = static_cast<int>(ranks.size());
    if (n >= 2) {
      double latency = 0;
      for (int i = 0; i < n; ++i) {
        latency = std::max(latency, LinkBetween(ranks[i], ranks[(i + 1) % n]).latency_s);
      }
      latency = std::max(latency, CollectiveCpuHopSeconds(c));
      vote = RingAllReduceSeconds(0, n, Link{1, latency});
    }
  }

  // Gradient all-reduce inputs: the largest gradient any device holds and the
  // slowest link of the ring over replicas in a canonical order (first stage's device).
  double grad_bytes = 0;
  Link slowest{std::numeric_limits<double>::infinity(), 0};
  if (training_ && R >= 2) {
    for (const CandidateReplica& rep : c.replicas) {
      for (const CandidateStage& s : rep.stages) {
        grad_bytes = std::max(grad_bytes, ParameterBytes(s.begin, s.end));
      }
    }
    std::vector<int> order(R);
    for (int r = 0; r < R; ++r) order[r] = r;
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      return c.replicas[a].stages[0].device < c.replicas[b].stages[0].device;
    });
    const int pairs = R == 2 ? 1 : R;
    for (int i = 0; i < pairs; ++i) {
      const CandidateReplica& a = c.replicas[order[i]];
      const CandidateReplica& b = c.replicas[order[(i + 1) % R]];
      for (const CandidateStage& sa : a.stages) {
        for (const CandidateStage& sb : b.stages) {
          const Link l = LinkBetween(sa.device, sb.device);
          slowest.bandwidth_bytes_per_s =
              std::min(slowest.bandwidth_bytes_per_s, l.bandwidth_bytes_per_s);
          slowest.latency_s = std::max(slowest.latency_s, l.latency_s);
        }
      }
    }
  }
  slowest.latency_s = std::max(slowest.latency_s, CollectiveCpuHopSeconds(c));
  const double ar = training_ && R >= 2 ? RingAllReduceSeconds(grad_bytes, R, slowest) : 0;
  // Synchronised batch norm: every batch norm all-reduces its statistics over the
  // replicas in the forward and in the backward of each micro-batch (tiny tensors:
  // the ring's latency), inside the stage's compute.
  const double per_batch_norm = training_ && R >= 2 ? 2 * RingAllReduceSeconds(0, R, slowest) : 0;
  const double buckets =
      std::max(1.0, std::ceil(grad_bytes / static_cast<double>(options_.gradient_bucket_bytes)));

  // Stage times, the critical replica and its bottleneck stage.
  std::vector<double> p2p(R, 0);
  ev.stage_time_s.assign(R, {});
  ev.stage_compute_s.assign(R, {});
  double worst = -1;
  double replicas_rate = 0;  // independent: samples/s summed over the replicas
  for (int r = 0; r < R; ++r) {
    const CandidateReplica& rep = c.replicas[r];
    const int S = static_cast<int>(rep.stages.size());
    const double micro = static_cast<double>(rep.batch) / M;
    double max_t = 0, send_sum = 0, send_at_max = 0, prev_busy = 0;
    int argmax = 0;
    std::vector<double> cycles;
    for (int s = 0; s < S; ++s) {
      const CandidateStage& st = rep.stages[s];
      const int next = s + 1 < S ? rep.stages[s + 1].device : -1;
      const int prev = s > 0 ? rep.stages[s - 1].device : -1;
      const double sync = per_batch_norm * (bn_prefix_[st.end] - bn_prefix_[st.begin]);
      const double t = StageSeconds(st.device, st.begin, st.end, micro, next, prev) + sync;
      const double compute = micro * ComputeSeconds(st.device, st.begin, st.end) +
                             FixedSeconds(st.device, st.begin, st.end) +
                             options_.micro_batch_overhead_s + sync;
      ev.stage_time_s[r].push_back(t);
      ev.stage_compute_s[r].push_back(M * (micro * ComputeSeconds(st.device, st.begin, st.end) +
                                           FixedSeconds(st.device, st.begin, st.end)));
      // 1F1B: stage s-1's backward + forward of one micro-batch and stage s's run in a
      // cycle of two micro-batches with the round trip's messages.
      if (training_ && c.schedule == Schedule::k1F1B && prev >= 0) {
        cycles.push_back(
            (prev_busy + compute + RoundTripMessageSeconds(prev, st.device, st.begin, micro)) / 2);
      }
      prev_busy = compute;
      send_sum += t - compute;
      if (t > max_t) {
        max_t = t;
        argmax = s;
        send_at_max = t - compute;
      }
    }
    const double replica_time = ReplicaSeconds(ev.stage_time_s[r], cycles, M);
    if (replica_time > 0) replicas_rate += static_cast<double>(rep.batch) / replica_time;
    p2p[r] = send_sum + (M - 1) * send_at_max;
    if (replica_time > worst) {
      worst = replica_time;
      ev.critical_replica = r;
      ev.bottleneck_stage = argmax;
    }
  }
  double visible = 0;
  if (ar > 0) {
    const CandidateReplica& crit = c.replicas[ev.critical_replica];
    const CandidateStage& bs = crit.stages[ev.bottleneck_stage];
    const double window =
        static_cast<double>(crit.batch) / M * BackwardSeconds(bs.device, bs.begin, bs.end);
    visible = std::max(ar / buckets, ar - window);
  }
  // The optimizer step, after each replicated stage's copies of its gradients into
  // the all-reduce buckets and back; the slowest stage ends the step.
  double optimizer = 0;
  for (const CandidateReplica& rep : c.replicas) {
    for (const CandidateStage& s : rep.stages) {
      double end = OptimizerSeconds(s.device, s.begin, s.end);
      if (R > 1) end += GradientCopySeconds(s.device, s.begin, s.end);
      optimizer = std::max(optimizer, end);
    }
  }
  ev.allreduce_s = visible;
  ev.step_end_s = optimizer + vote;
  ev.step_s = worst + visible + ev.step_end_s;
  if (independent && replicas_rate > 0) {
    // The time the ranks take for a global batch between them.
    ev.step_s = static_cast<double>(global_batch_) / replicas_rate;
  }
  ev.samples_per_s = static_cast<double>(global_batch_) / ev.step_s;
  const CandidateReplica& crit = c.replicas[ev.critical_replica];
  const int S = static_cast<int>(crit.stages.size());
  if (S > 1) {
    double sum = 0;
    for (double t : ev.stage_time_s[ev.critical_replica]) sum += t;
    ev.bubble = 1.0 - M * sum / (S * worst);
  }
  ev.comm = (ev.allreduce_s + p2p[ev.critical_replica]) / ev.step_s;
  ev.feasible = true;
  return ev;
}

double CostModel::NominalPixels() const { return static_cast<double>(nominal_px_) * nominal_px_; }

double CostModel::TileSeconds(int dev, int tile_px) const {
  const auto& p = fwd_prefix_[devices_[dev].speed_class];
  return p[num_layers_] * (static_cast<double>(tile_px) * tile_px / NominalPixels());
}

double CostModel::TileActivationBytes(int tile_px) const {
  double peak = 0;
  for (int l = 0; l < num_layers_; ++l) peak = std::max(peak, in_[l] + out_[l]);
  return peak * (static_cast<double>(tile_px) * tile_px / NominalPixels());
}

}  // namespace tessera::scheduler
