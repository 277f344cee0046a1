#include "scheduler/cost_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/scheduler/builders.h"

namespace tessera::scheduler::testing {
namespace {

// 40 TFLOPS at 50% efficiency: 20e12 FLOP/s; a 2 GFLOP layer takes 0.1 ms forward.
ClusterSnapshot TwoFastOneNode() {
  return ClusterBuilder().Node("a").Gpus(2, "fast", 24, 40).Build();
}

// Two 2-GFLOP layers with nothing of note to send between them.
ModelProfile TwoLayersNoOutput() { return ModelBuilder().Layers(2, 2, 1, 1, 0).Build(); }

// Layers [0, 1) on device 0 and [1, 2) on device 1: one replica of 8 samples in 4
// micro-batches.
Candidate TwoStagePipeline() {
  Candidate c;
  c.micro_batches = 4;
  c.replicas.push_back({8, {{0, 0, 1}, {1, 1, 2}}});
  return c;
}

// Every layer of [0, layers) on each device 0 .. devices-1, `batch` samples each.
Candidate DataParallel(int devices, int64_t batch, int layers) {
  Candidate c;
  for (int d = 0; d < devices; ++d) c.replicas.push_back({batch, {{d, 0, layers}}});
  return c;
}

TEST(CostModelTest, ComputeTimeFromFlopsAndMeasuredOverride) {
  ModelProfile m = ModelBuilder().Layers(2, 2, 10, 1, 1).Build();
  m.layers[1].measured_forward_ms["fast"] = 3.0;
  m.layers[1].measured_backward_ms["fast"] = 5.0;
  const CostModel cm = CostModel::Create(TwoFastOneNode(), m, Train(4));
  EXPECT_NEAR(cm.ForwardSeconds(0, 0, 1), 1e-4, 1e-12);
  EXPECT_NEAR(cm.BackwardSeconds(0, 0, 1), 2e-4, 1e-12);  // backward = 2 x forward FLOPs
  EXPECT_NEAR(cm.ForwardSeconds(0, 1, 2), 3e-3, 1e-12);   // measured
  EXPECT_NEAR(cm.BackwardSeconds(0, 1, 2), 5e-3, 1e-12);
  const CostModel infer = CostModel::Create(TwoFastOneNode(), m, Infer(4));
  EXPECT_EQ(infer.BackwardSeconds(0, 0, 2), 0);
}

TEST(CostModelTest, HalfPrecisionUsesHalfThroughput) {
  ModelProfile m = ModelBuilder().Layers(1, 2, 10, 1, 1).Build();
  m.precision = Precision::kBf16;
  const CostModel cm = CostModel::Create(TwoFastOneNode(), m, Train(4));
  EXPECT_NEAR(cm.ForwardSeconds(0, 0, 1), 0.5e-4, 1e-12);  // tflops_half defaults to 2x
  // A measured 16-bit throughput replaces the default: 160 TFLOPS at 50% -> 25 us.
  ClusterSnapshot measured = TwoFastOneNode();
  for (Device& d : measured.nodes[0].devices) d.tflops_half = 160;
  const CostModel half = CostModel::Create(measured, m, Train(4));
  EXPECT_NEAR(half.ForwardSeconds(0, 0, 1), 0.25e-4, 1e-12);
  // float32 jobs ignore it.
  m.precision = Precision::kFp32;
  EXPECT_NEAR(CostModel::Create(measured, m, Train(4)).ForwardSeconds(0, 0, 1), 1e-4, 1e-12);
}

TEST(CostModelTest, MemoryTermsBySchedule) {
  // 10 MB params; Adam (multiplier 2) -> params + grads + 2x state = 40 MB.
  const ModelProfile m = ModelBuilder().Layers(4, 1, 10, 5, 1).Build();
  const CostModel train = CostModel::Create(TwoFastOneNode(), m, Train(8));
  EXPECT_DOUBLE_EQ(train.WeightBytes(0, 1), 40e6);
  EXPECT_DOUBLE_EQ(train.ActivationBytesPerSample(0, 2), 10e6);
  // 1F1B: stage s of S keeps min(M, S - s) micro-batches; GPipe keeps M.
  EXPECT_EQ(CostModel::InFlight(Schedule::k1F1B, 8, 4, 0), 4);
  EXPECT_EQ(CostModel::InFlight(Schedule::k1F1B, 8, 4, 3), 1);
  EXPECT_EQ(CostModel::InFlight(Schedule::k1F1B, 2, 4, 0), 2);
  EXPECT_EQ(CostModel::InFlight(Schedule::kGPipe, 8, 4, 3), 8);
  EXPECT_DOUBLE_EQ(train.StageMemoryBytes(0, 2, 3, 4), 80e6 + 4 * 3 * 10e6);
  // Inference: parameters only, one micro-batch's widest layer (input + output).
  const CostModel infer = CostModel::Create(TwoFastOneNode(), m, Infer(8));
  EXPECT_DOUBLE_EQ(infer.WeightBytes(0, 1), 10e6);
  EXPECT_DOUBLE_EQ(infer.ActivationBytesPerSample(1, 3), 2e6);
}

TEST(CostModelTest, StageMemoryHoldsItsInputAndOneBackwardWorkingSet) {
  // 4 layers: 5 MB kept, 1 MB out per sample; layer 2 needs 7 MB while its backward runs.
  ModelProfile m = ModelBuilder().Layers(4, 1, 10, 5, 1).Build();
  m.layers[2].backward_transient_bytes = 7'000'000;
  const CostModel cm = CostModel::Create(TwoFastOneNode(), m, Train(8));
  // A middle stage [1, 3): its input (layer 0's 1 MB output) is held with every in-flight
  // micro-batch; one micro-batch adds the largest transient (7 MB); the gradients sent
  // back wait for max(2, in flight) micro-batches (1 MB each per sample).
  EXPECT_DOUBLE_EQ(cm.ActivationBytesPerSample(1, 3), 10e6 + 1e6);
  EXPECT_DOUBLE_EQ(cm.StageMemoryBytes(1, 3, 2, 3), 80e6 + 3 * 2 * 11e6 + 2 * (7e6 + 3 * 1e6));
  EXPECT_DOUBLE_EQ(cm.StageMemoryBytes(3, 4, 2, 1), 40e6 + 1 * 2 * 6e6 + 2 * (0 + 2 * 1e6));
  // The first stage sends no gradient back.
  EXPECT_DOUBLE_EQ(cm.StageMemoryBytes(0, 1, 2, 1), 40e6 + 1 * 2 * 5e6);
}

TEST(CostModelTest, ReplicatedLayersHoldTheirGradientBucketsToo) {
  // 10 MB of parameters; SGD with momentum: parameters, gradients, state = 30 MB.
  ModelProfile m = ModelBuilder().Layers(1, 1, 10, 5, 1).Build();
  m.optimizer_state_multiplier = 1;
  const CostModel cm = CostModel::Create(TwoFastOneNode(), m, Train(8));
  EXPECT_DOUBLE_EQ(cm.ReplicaWeightBytes(0, 1, false), 30e6);
  EXPECT_DOUBLE_EQ(cm.ReplicaWeightBytes(0, 1, true), 40e6);
  EXPECT_DOUBLE_EQ(cm.StageMemoryBytes(0, 1, 2, 1, true) - cm.StageMemoryBytes(0, 1, 2, 1), 10e6);
  // Inference all-reduces nothing.
  const CostModel infer = CostModel::Create(TwoFastOneNode(), m, Infer(8));
  EXPECT_DOUBLE_EQ(infer.ReplicaWeightBytes(0, 1, true), infer.WeightBytes(0, 1));
  // Two replicas of the whole model each carry the buckets in the evaluated plan.
  const Evaluation two = cm.Evaluate(DataParallel(2, 4, 1));
  const Evaluation one = cm.Evaluate(DataParallel(1, 8, 1));
  ASSERT_TRUE(two.feasible) << two.reason;
  ASSERT_TRUE(one.feasible) << one.reason;
  EXPECT_DOUBLE_EQ(static_cast<double>(two.stage_memory_bytes[0][0]),
                   cm.StageMemoryBytes(0, 1, 4, 1, true));
  EXPECT_DOUBLE_EQ(static_cast<double>(one.stage_memory_bytes[0][0]),
                   cm.StageMemoryBytes(0, 1, 8, 1, false));
}

TEST(CostModelTest, SynchronisedBatchNormsCostARingLatencyEachWayPerReplicaSet) {
  ModelProfile plain = ModelBuilder().Layers(2, 1, 10, 1, 1).Build();
  ModelProfile bn = plain;
  bn.layers[0].batch_norms = 3;
  const CostModel a = CostModel::Create(TwoFastOneNode(), plain, Train(8));
  const CostModel b = CostModel::Create(TwoFastOneNode(), bn, Train(8));
  const Candidate two = DataParallel(2, 4, 2);
  const Evaluation ea = a.Evaluate(two), eb = b.Evaluate(two);
  ASSERT_TRUE(ea.feasible && eb.feasible);
  const Link link = a.LinkBetween(0, 1);
  // 3 batch norms x (forward + backward) x a 2-rank ring all-reduce of nothing.
  EXPECT_NEAR(eb.step_s - ea.step_s, 3 * 2 * CostModel::RingAllReduceSeconds(0, 2, link), 1e-12);
  const Candidate one = DataParallel(1, 8, 2);  // one replica: no synchronisation
  EXPECT_NEAR(b.Evaluate(one).step_s, a.Evaluate(one).step_s, 1e-15);
}

// Ranks of one machine spend its cores on their collectives' hops: a hop takes at
// least ranks there x CPU per hop / cores, the link's latency when that is longer.
TEST(CostModelTest, RanksSharingAMachineWaitForItsCoresOnEachHop) {
  ModelProfile m = ModelBuilder().Layers(2, 1, 10, 1, 1).Build();
  m.layers[0].batch_norms = 3;
  // Nodes a and b of two devices each, on machines host_a and host_b ("": unknown).
  auto two_nodes = [](const char* host_a, const char* host_b, int cores, double cpu_per_hop) {
    ClusterBuilder b;
    for (const auto& [node, host] : {std::pair{"a", host_a}, std::pair{"b", host_b}}) {
      b.Node(node).Gpus(2, "g", 24, 40);
      if (*host != '\0') b.Host(host, cores, cpu_per_hop);
    }
    return b.Build();
  };
  struct Row {
    const char* name;
    ClusterSnapshot cluster;
    int ranks;
    double hop_s;  // the ring's latency per hop the step must pay
  };
  const double lat = 50e-6;  // the builder's network latency (above its intra-node 10 us)
  const Row rows[] = {
      {"own_machines_unknown_cpu", two_nodes("", "", 0, 0), 4, lat},
      {"one_machine_of_2_cores", two_nodes("h", "h", 2, 1e-3), 4, 4 * 1e-3 / 2},
      {"two_ranks_of_the_same_machine", two_nodes("h", "h", 2, 1e-3), 2, 2 * 1e-3 / 2},
      {"two_machines_count_their_own_ranks", two_nodes("h1", "h2", 2, 1e-3), 4, 2 * 1e-3 / 2},
      {"many_cores_leave_the_link", two_nodes("h", "h", 64, 1e-4), 4, lat},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    const CostModel cm = CostModel::Create(row.cluster, m, Train(8));
    // Ranks on devices 0, 1 (node a) and then 2, 3 (node b).
    Candidate c;
    const int order[] = {0, 2, 1, 3};
    for (int r = 0; r < row.ranks; ++r) c.replicas.push_back({8 / row.ranks, {{order[r], 0, 2}}});
    const Evaluation e = cm.Evaluate(c);
    ASSERT_TRUE(e.feasible) << e.reason;
    // The same candidate on the same devices with no batch norm pays no synchronisation.
    ModelProfile plain = m;
    plain.layers[0].batch_norms = 0;
    const Evaluation p = CostModel::Create(row.cluster, plain, Train(8)).Evaluate(c);
    const double per_bn = 2 * CostModel::RingAllReduceSeconds(0, row.ranks, Link{1e9, row.hop_s});
    EXPECT_NEAR(e.step_s - p.step_s, 3 * per_bn, 1e-9);
  }
}

TEST(CostModelTest, RingAllReduceFormula) {
  const Link link{1e9, 1e-5};
  EXPECT_DOUBLE_EQ(CostModel::RingAllReduceSeconds(1e9, 1, link), 0);
  EXPECT_NEAR(CostModel::RingAllReduceSeconds(1e9, 4, link), 2.0 * 3 / 4 * 1.0 + 6 * 1e-5, 1e-12);
}

TEST(CostModelTest, LinksNvlinkNodeDefaultAndOverride) {
  ClusterSnapshot c = ClusterBuilder()
                          .Node("a", 10, 16)
                          .Gpus(3, "fast", 24, 40)
                          .NvLink(0, 1, 150)
                          .Node("b", 100)
                          .Gpu("fast", 24, 40)
                          .Build();
  const ModelProfile m = ModelBuilder().Layers(1, 1, 1, 1, 1).Build();
  CostModel cm = CostModel::Create(c, m, Train(2));
  EXPECT_DOUBLE_EQ(cm.LinkBetween(0, 1).bandwidth_bytes_per_s, 150e9);
  EXPECT_DOUBLE_EQ(cm.LinkBetween(0, 2).bandwidth_bytes_per_s, 16e9);
  EXPECT_DOUBLE_EQ(cm.LinkBetween(0, 3).bandwidth_bytes_per_s, 10e9 / 8);  // slower NIC
  c.node_links.push_back(NodeLink{"a", "b", Link{3e9, 1e-6}});
  cm = CostModel::Create(c, m, Train(2));
  EXPECT_DOUBLE_EQ(cm.LinkBetween(3, 0).bandwidth_bytes_per_s, 3e9);
  EXPECT_DOUBLE_EQ(c.LinkBetween({"a", 0}, {"a", 1}).bandwidth_bytes_per_s, 150e9);
}

TEST(CostModelTest, PipelineStepAndBubbleForIdenticalStages) {
  // Two identical stages, no sends of note: T = (M + S - 1) t, bubble (S-1)/(M+S-1).
  // One message per send, so the forward and the gradient send cost the same.
  CostModelOptions options;
  options.forward_send_messages = 1;
  const CostModel cm = CostModel::Create(TwoFastOneNode(), TwoLayersNoOutput(), Train(8), options);
  const Evaluation ev = cm.Evaluate(TwoStagePipeline());
  ASSERT_TRUE(ev.feasible) << ev.reason;
  const double link_latency = 10e-6;
  const double t = 2 * 3e-4 + cm.options().micro_batch_overhead_s + link_latency;
  EXPECT_NEAR(ev.stage_time_s[0][0], t, 1e-12);
  EXPECT_NEAR(ev.stage_time_s[0][1], t, 1e-12);
  EXPECT_NEAR(ev.step_end_s, 2 * link_latency, 1e-12);  // step-end vote of 2 ranks
  EXPECT_NEAR(ev.step_s, 5 * t + ev.step_end_s, 1e-9);
  EXPECT_NEAR(ev.bubble, 1.0 / 5, 1e-9);
}

TEST(CostModelTest, DataParallelAllReduceOverlapsWithBackward) {
  // 2 x 100 MB gradients over PCIe (16 GB/s): ring = 2(1/2) x 200 MB / 16 GB/s = 12.5 ms.
  const ModelProfile m = ModelBuilder().Layers(2, 2, 100, 1, 1).Build();
  const CostModel cm = CostModel::Create(TwoFastOneNode(), m, Train(8));
  const Evaluation ev = cm.Evaluate(DataParallel(2, 4, 2));
  ASSERT_TRUE(ev.feasible) << ev.reason;
  const double ar = CostModel::RingAllReduceSeconds(200e6, 2, Link{16e9, 10e-6});
  const double window = 4 * cm.BackwardSeconds(0, 0, 2);
  const double buckets = 8;  // ceil(200 MB / 25 MiB)
  const double compute = 4 * cm.ComputeSeconds(0, 0, 2) + cm.options().micro_batch_overhead_s;
  EXPECT_NEAR(ev.allreduce_s, std::max(ar / buckets, ar - window), 1e-12);
  EXPECT_NEAR(ev.step_s, compute + ev.allreduce_s + ev.step_end_s, 1e-12);
  EXPECT_GT(ev.comm, 0);
}

TEST(CostModelTest, ForwardSendPaysOneLatencyPerMessage) {
  // Stage 0 sends header + tensors (2 latencies); stage 1 sends gradients (1 latency).
  const CostModel cm = CostModel::Create(TwoFastOneNode(), TwoLayersNoOutput(), Train(8));
  const Evaluation ev = cm.Evaluate(TwoStagePipeline());
  ASSERT_TRUE(ev.feasible) << ev.reason;
  EXPECT_NEAR(ev.stage_time_s[0][0] - ev.stage_time_s[0][1], 10e-6, 1e-12);
}

// Measured per-call (fixed) milliseconds: paid once per micro-batch, not per sample,
// divided by the relative speed like the per-sample times.
struct FixedCostCase {
  std::string name;
  bool training;
  double relative_speed;
  double micro;          // samples per micro-batch
  double stage_compute;  // expected m x C + F, seconds
};

class FixedCostTest : public ::testing::TestWithParam<FixedCostCase> {};

TEST_P(FixedCostTest, StageTimeIsPerSampleTimesMicroPlusFixed) {
  const FixedCostCase& tc = GetParam();
  ModelProfile m = ModelBuilder().Layers(2, 2, 1, 1, 1).Build();
  for (Layer& l : m.layers) {
    l.measured_forward_ms["cpu"] = 1.0;  // per sample
    l.measured_backward_ms["cpu"] = 2.0;
    l.measured_forward_fixed_ms["cpu"] = 0.5;  // per micro-batch
    l.measured_backward_fixed_ms["cpu"] = 1.5;
  }
  ClusterSnapshot cluster = TwoFastOneNode();
  cluster.nodes[0].devices[0].measured_as = "cpu";
  cluster.nodes[0].devices[0].relative_speed = tc.relative_speed;
  const CostModel cm = CostModel::Create(cluster, m, tc.training ? Train(8) : Infer(8));
  const double o = cm.options().micro_batch_overhead_s;
  EXPECT_NEAR(cm.StageSeconds(0, 0, 2, tc.micro, -1, -1), tc.stage_compute + o, 1e-12);
  // The per-sample part stays per sample.
  EXPECT_NEAR(cm.ComputeSeconds(0, 0, 2), (tc.training ? 6e-3 : 2e-3) / tc.relative_speed, 1e-12);
}

INSTANTIATE_TEST_SUITE_P(
    Table, FixedCostTest,
    ::testing::Values(
        // 2 layers x (1 + 2) ms per sample x 4 + 2 x (0.5 + 1.5) ms per call.
        FixedCostCase{"train_micro_4", true, 1.0, 4, 4 * 6e-3 + 4e-3},
        // Half the micro-batch: the per-call part stays, so per sample it costs more.
        FixedCostCase{"train_micro_2", true, 1.0, 2, 2 * 6e-3 + 4e-3},
        // Half-speed emulated device: both parts twice as long.
        FixedCostCase{"train_half_speed", true, 0.5, 4, 2 * (4 * 6e-3 + 4e-3)},
        // Inference: forward only.
        FixedCostCase{"infer_micro_4", false, 1.0, 4, 4 * 2e-3 + 1e-3}),
    [](const auto& info) { return info.param.name; });

TEST(CostModelTest, FixedCostIsPaidOncePerMicroBatch) {
  // One stage, 8 samples: 2 micro-batches pay the per-call part twice, 1 pays it once.
  ModelProfile m = ModelBuilder().Layers(1, 2, 1, 1, 1).Build();
  m.layers[0].measured_forward_ms["cpu"] = 1.0;
  m.layers[0].measured_backward_ms["cpu"] = 2.0;
  m.layers[0].measured_forward_fixed_ms["cpu"] = 3.0;
  m.layers[0].measured_backward_fixed_ms["cpu"] = 1.0;
  ClusterSnapshot cluster = TwoFastOneNode();
  cluster.nodes[0].devices[0].measured_as = "cpu";
  const CostModel cm = CostModel::Create(cluster, m, Train(8));
  const Candidate one = DataParallel(1, 8, 1);
  Candidate two = one;
  two.micro_batches = 2;
  const Evaluation e1 = cm.Evaluate(one), e2 = cm.Evaluate(two);
  ASSERT_TRUE(e1.feasible && e2.feasible);
  EXPECT_NEAR(e2.step_s - e1.step_s, 4e-3 + cm.options().micro_batch_overhead_s, 1e-12);
}

TEST(CostModelTest, RoundTripCycleIsTheMeanOfTheStageTimes) {
  // The cycle is the mean of the two stage times (each carries its own
  // sends), so it never exceeds the slower one: the old formula holds exactly.
  const CostModel cm = CostModel::Create(TwoFastOneNode(), TwoLayersNoOutput(), Train(8));
  const Evaluation ev = cm.Evaluate(TwoStagePipeline());
  ASSERT_TRUE(ev.feasible);
  const auto& t = ev.stage_time_s[0];
  EXPECT_NEAR(ev.step_s, t[0] + t[1] + 3 * std::max(t[0], t[1]) + ev.step_end_s, 1e-12);
  const double cycle = (t[0] + t[1]) / 2;
  EXPECT_NEAR(CostModel::ReplicaSeconds(t, {cycle}, 4), t[0] + t[1] + 3 * std::max(t[0], t[1]),
              1e-15);
  EXPECT_NEAR(CostModel::ReplicaSeconds(t, {1.0}, 4), t[0] + t[1] + 3.0, 1e-15);
}

// Emulated devices: measured CPU times divided by the device's relative speed.
struct MeasuredAsCase {
  std::string name;
  std::string measured_as;
  double relative_speed;
  double forward_s;  // of the measured layer, per sample
};

class MeasuredAsTest : public ::testing::TestWithParam<MeasuredAsCase> {};

TEST_P(MeasuredAsTest, ForwardSeconds) {
  ModelProfile m = ModelBuilder().Layers(1, 2, 10, 1, 1).Build();
  m.layers[0].measured_forward_ms["cpu"] = 4.0;
  m.layers[0].measured_backward_ms["cpu"] = 8.0;
  ClusterSnapshot cluster = ClusterBuilder().Node("a").Gpu("A100 (emulated)", 24, 40).Build();
  cluster.nodes[0].devices[0].measured_as = GetParam().measured_as;
  cluster.nodes[0].devices[0].relative_speed = GetParam().relative_speed;
  const CostModel cm = CostModel::Create(cluster, m, Train(4));
  EXPECT_NEAR(cm.ForwardSeconds(0, 0, 1), GetParam().forward_s, 1e-12);
}

INSTANTIATE_TEST_SUITE_P(
    Table, MeasuredAsTest,
    ::testing::Values(MeasuredAsCase{"own_type_has_no_measurement_flops", "", 1.0, 1e-4},
                      MeasuredAsCase{"measured_as_cpu", "cpu", 1.0, 4e-3},
                      MeasuredAsCase{"half_speed_takes_twice_as_long", "cpu", 0.5, 8e-3},
                      MeasuredAsCase{"unknown_measured_type_falls_back_to_flops", "tpu", 0.5,
                                     1e-4}),
    [](const auto& info) { return info.param.name; });

TEST(CostModelTest, StepEndAddsOptimizerPassAndVote) {
  // 10 MB of parameters, Adam: 40 MB of weights read and written once at 10 GB/s = 8 ms;
  // the vote over 2 ranks on PCIe (10 us) costs 2 latencies.
  const ModelProfile m = ModelBuilder().Layers(1, 2, 10, 1, 1).Build();
  ClusterSnapshot cluster = TwoFastOneNode();
  for (Device& d : cluster.nodes[0].devices) d.memory_bandwidth_bytes_per_s = 10e9;
  const CostModel cm = CostModel::Create(cluster, m, Train(8));
  EXPECT_NEAR(cm.OptimizerSeconds(0, 0, 1), 2 * 40e6 / 10e9, 1e-12);
  EXPECT_NEAR(cm.Evaluate(DataParallel(1, 8, 1)).step_end_s, 8e-3, 1e-12) << "one rank: no vote";
  // Two replicas also copy their 10 MB of gradients into the buckets and back (two
  // copies, each read and written: 40 MB at 10 GB/s = 4 ms), and vote.
  EXPECT_NEAR(cm.GradientCopySeconds(0, 0, 1), 4e-3, 1e-12);
  EXPECT_NEAR(cm.Evaluate(DataParallel(2, 4, 1)).step_end_s, 8e-3 + 4e-3 + 2 * 10e-6, 1e-12);
  const CostModel infer = CostModel::Create(cluster, m, Infer(8));
  EXPECT_EQ(infer.OptimizerSeconds(0, 0, 1), 0);
}

TEST(CostModelTest, MeasuredOptimizerStepReplacesTheBandwidthEstimate) {
  // Two layers; the profile measured the step on the CPU: 3 ms and 1 ms.
  ModelProfile m = ModelBuilder().Layers(2, 2, 10, 1, 1).Build();
  m.layers[0].measured_optimizer_ms["cpu"] = 3.0;
  m.layers[1].measured_optimizer_ms["cpu"] = 1.0;
  ClusterSnapshot cluster = TwoFastOneNode();
  for (Device& d : cluster.nodes[0].devices) d.memory_bandwidth_bytes_per_s = 10e9;
  cluster.nodes[0].devices[0].measured_as = "cpu";
  cluster.nodes[0].devices[0].relative_speed = 0.25;  // an emulated device at 1/4
  const CostModel cm = CostModel::Create(cluster, m, Train(8));
  EXPECT_NEAR(cm.OptimizerSeconds(0, 0, 2), 4e-3 / 0.25, 1e-12);
  EXPECT_NEAR(cm.OptimizerSeconds(0, 1, 2), 1e-3 / 0.25, 1e-12);
  // Not measured for device 1's type ("fast"): memory bandwidth as before.
  EXPECT_NEAR(cm.OptimizerSeconds(1, 0, 2), 2 * 2 * 40e6 / 10e9, 1e-12);
  // One layer without a measurement: the range falls back to bandwidth.
  m.layers[1].measured_optimizer_ms.clear();
  const CostModel partial = CostModel::Create(cluster, m, Train(8));
  EXPECT_NEAR(partial.OptimizerSeconds(0, 0, 2), 2 * 2 * 40e6 / 10e9, 1e-12);
  EXPECT_NEAR(partial.OptimizerSeconds(0, 0, 1), 3e-3 / 0.25, 1e-12);
}

TEST(CostModelTest, MeasuredGradientCopiesCountOnlyForReplicatedStages) {
  ModelProfile m = ModelBuilder().Layers(1, 2, 10, 1, 1).Build();
  m.layers[0].measured_optimizer_ms["cpu"] = 1.0;
  m.layers[0].measured_gradient_copy_ms["cpu"] = 0.5;
  ClusterSnapshot cluster = TwoFastOneNode();
  for (Device& d : cluster.nodes[0].devices) {
    d.measured_as = "cpu";
    d.relative_speed = 0.5;
  }
  const CostModel cm = CostModel::Create(cluster, m, Train(8));
  EXPECT_NEAR(cm.GradientCopySeconds(0, 0, 1), 1e-3, 1e-12);
  EXPECT_NEAR(cm.Evaluate(DataParallel(1, 8, 1)).step_end_s, 2e-3, 1e-12)
      << "one replica copies nothing";
  EXPECT_NEAR(cm.Evaluate(DataParallel(2, 4, 1)).step_end_s, 2e-3 + 1e-3 + 2 * 10e-6, 1e-12);
  const CostModel infer = CostModel::Create(cluster, m, Infer(8));
  EXPECT_EQ(infer.GradientCopySeconds(0, 0, 1), 0);
}

struct BadCandidateCase {
  std::string name;
  Candidate candidate;
  std::string reason_part;
};

class BadCandidateTest : public ::testing::TestWithParam<BadCandidateCase> {};

TEST_P(BadCandidateTest, RejectedWithReason) {
  ClusterSnapshot cluster =
      ClusterBuilder().Node("a").Gpus(2, "fast", 1, 40).Gpu("x", 24, 40, true).Build();
  const ModelProfile m = ModelBuilder().Layers(4, 1, 100, 10, 1).Build();
  const CostModel cm = CostModel::Create(cluster, m, Train(4));
  const Evaluation ev = cm.Evaluate(GetParam().candidate);
  EXPECT_FALSE(ev.feasible);
  EXPECT_NE(ev.reason.find(GetParam().reason_part), std::string::npos) << ev.reason;
}

INSTANTIATE_TEST_SUITE_P(
    Table, BadCandidateTest,
    ::testing::Values(
        BadCandidateCase{"does_not_fit", Candidate{{{4, {{0, 0, 4}}}}, 1, Schedule::k1F1B},
                         "doesn't fit on a:0"},
        BadCandidateCase{"busy_device", Candidate{{{4, {{2, 0, 4}}}}, 1, Schedule::k1F1B},
                         "a:2 is busy"},
        BadCandidateCase{"device_twice",
                         Candidate{{{2, {{0, 0, 4}}}, {2, {{0, 0, 4}}}}, 1, Schedule::k1F1B},
                         "used twice"},
        BadCandidateCase{"gap_in_layers",
                         Candidate{{{4, {{0, 0, 1}, {1, 2, 4}}}}, 1, Schedule::k1F1B},
                         "tile the layers"},
        BadCandidateCase{"batch_mismatch", Candidate{{{3, {{0, 0, 4}}}}, 1, Schedule::k1F1B},
                         "sum to the global batch"},
        BadCandidateCase{"too_many_micro_batches",
                         Candidate{{{4, {{0, 0, 4}}}}, 5, Schedule::k1F1B},
                         "smaller than 5 micro-batches"}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tessera::scheduler::testing
