#include "launch/worker_env.h"

#include <gtest/gtest.h>

namespace tessera::launch {
namespace {

std::vector<api::Device> Inventory() {
  std::vector<api::Device> inv;
  api::Device gpu0;
  gpu0.index = 0;
  gpu0.type = "cuda";
  gpu0.uuid = "GPU-aaaa";
  api::Device gpu1 = gpu0;
  gpu1.index = 1;
  gpu1.uuid = "";
  api::Device emu;
  emu.index = 2;
  emu.type = "cuda";
  emu.emulated = true;
  emu.relative_speed = 0.5;
  emu.memory_bytes = int64_t{8} << 30;
  api::Device emu_fast = emu;
  emu_fast.index = 3;
  emu_fast.relative_speed = 2;
  emu_fast.memory_bytes = int64_t{16} << 30;
  api::Device cpu;
  cpu.index = 4;
  cpu.type = "cpu";
  inv = {gpu0, gpu1, emu, emu_fast, cpu};
  return inv;
}

// With `error_field` set, `env` is an error naming that field; without it,
// `env` holds every variable of `want` with its value.
void ExpectEnv(const Result<EnvMap>& env, const EnvMap& want, const char* error_field) {
  if (error_field) {
    ASSERT_FALSE(env.ok());
    EXPECT_EQ(env.status().field(), error_field);
    return;
  }
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  for (const auto& [k, v] : want) {
    ASSERT_TRUE(env->count(k)) << k;
    EXPECT_EQ(env->at(k), v) << k;
  }
}

struct Row {
  const char* name;
  std::vector<int64_t> indices;
  EnvMap want;              // subset that must match
  const char* error_field;  // non-null: expected error
};

class DeviceEnv : public ::testing::TestWithParam<Row> {};

TEST_P(DeviceEnv, Table) {
  const Row& row = GetParam();
  api::WorkerLaunch launch;
  launch.device_indices = row.indices;
  ExpectEnv(DeviceEnvFor(launch, {}, Inventory(), 4), row.want, row.error_field);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, DeviceEnv,
    ::testing::Values(
        Row{"no_devices_is_cpu",
            {},
            {{"TESSERA_DEVICE", "cpu"},
             {"CUDA_VISIBLE_DEVICES", ""},
             {"TESSERA_DEVICE_SPEED", "1"}},
            nullptr},
        Row{"real_gpu_by_uuid",
            {0},
            {{"TESSERA_DEVICE", "cuda:0"},
             {"CUDA_VISIBLE_DEVICES", "GPU-aaaa"},
             {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}},
            nullptr},
        Row{"two_gpus_index_without_uuid",
            {0, 1},
            {{"TESSERA_DEVICE", "cuda:0"}, {"CUDA_VISIBLE_DEVICES", "GPU-aaaa,1"}},
            nullptr},
        Row{"emulated_runs_on_cpu_at_speed",
            {2},
            {{"TESSERA_DEVICE", "cpu"},
             {"TESSERA_DEVICE_SPEED", "0.5"},
             {"CUDA_VISIBLE_DEVICES", ""}},
            nullptr},
        Row{"emulated_pair_takes_slowest", {3, 2}, {{"TESSERA_DEVICE_SPEED", "0.5"}}, nullptr},
        Row{"emulated_memory_is_declared_memory",
            {3},
            {{"TESSERA_DEVICE_MEMORY", std::to_string(int64_t{16} << 30)}},
            nullptr},
        Row{"emulated_pair_takes_smallest_memory",
            {3, 2},
            {{"TESSERA_DEVICE_MEMORY", std::to_string(int64_t{8} << 30)}},
            nullptr},
        Row{"cpu_device", {4}, {{"TESSERA_DEVICE", "cpu"}, {"TESSERA_DEVICE_SPEED", "1"}}, nullptr},
        Row{"unknown_index", {0, 9}, {}, "device_indices[1]"},
        Row{"mixing_real_and_emulated", {0, 2}, {}, "device_indices"}),
    [](const auto& info) { return std::string(info.param.name); });

// A node with `gpus` real GPUs ("GPU-0".., indices 0..gpus-1) and one emulated
// device after them.
std::vector<api::Device> GpuNode(int gpus) {
  std::vector<api::Device> inv;
  for (int i = 0; i < gpus; ++i) {
    api::Device gpu;
    gpu.index = i;
    gpu.type = "cuda";
    gpu.uuid = "GPU-" + std::to_string(i);
    inv.push_back(gpu);
  }
  api::Device emu;
  emu.index = gpus;
  emu.type = "cuda";
  emu.emulated = true;
  emu.relative_speed = 0.5;
  inv.push_back(emu);
  return inv;
}

// One rank of job `job`, attempt `attempt`, as the controller launches it.
api::WorkerLaunch Rank(api::JobId job, int64_t attempt, int64_t rank, int local_rank,
                       int local_world, std::vector<int64_t> devices) {
  api::WorkerLaunch l;
  l.key = {job, attempt, rank};
  l.env = {{"RANK", std::to_string(rank)},
           {"LOCAL_RANK", std::to_string(local_rank)},
           {"LOCAL_WORLD_SIZE", std::to_string(local_world)}};
  l.device_indices = std::move(devices);
  return l;
}

api::WorkerLaunch WithEnv(api::WorkerLaunch l, const std::string& key, const std::string& value) {
  l.env[key] = value;
  return l;
}

struct NodeRow {
  const char* name;
  int gpus;                                // the node: GpuNode(gpus)
  std::vector<api::WorkerLaunch> desired;  // the node's desired set
  api::WorkerLaunch launch;                // the rank being started
  int64_t cores;
  EnvMap want;                           // subset that must match
  std::vector<std::string> absent = {};  // variables that must not be set
  const char* error_field = nullptr;
};

// The GPUs a rank is shown (CUDA_VISIBLE_DEVICES) and the one it uses (TESSERA_DEVICE).
EnvMap Sees(const std::string& visible, const std::string& device) {
  return {{"CUDA_VISIBLE_DEVICES", visible}, {"TESSERA_DEVICE", device}};
}

// The threads a rank is given (OMP_NUM_THREADS).
EnvMap Threads(const std::string& n) { return {{"OMP_NUM_THREADS", n}}; }

class NodeEnv : public ::testing::TestWithParam<NodeRow> {};

TEST_P(NodeEnv, Table) {
  const NodeRow& row = GetParam();
  auto env = DeviceEnvFor(row.launch, row.desired, GpuNode(row.gpus), row.cores);
  ExpectEnv(env, row.want, row.error_field);
  if (row.error_field != nullptr || !env.ok()) return;
  for (const auto& k : row.absent) EXPECT_FALSE(env->count(k)) << k;
}

// Two-GPU node: job 7 (attempt 1) has a rank on each GPU.
const std::vector<api::WorkerLaunch> kTwoGpuJob = {Rank(7, 1, 0, 0, 2, {0}),
                                                   Rank(7, 1, 1, 1, 2, {1})};
// Two-GPU node, the planner gave local rank 0 the second GPU.
const std::vector<api::WorkerLaunch> kTwoGpuSwapped = {Rank(7, 1, 2, 1, 2, {0}),
                                                       Rank(7, 1, 3, 0, 2, {1})};
// Four-GPU node shared by two jobs, listed out of order: job 7 holds GPUs 3
// and 1 (local ranks 0, 1), job 8 holds GPUs 0 and 2; job 7's attempt 1 rank
// on GPU 2 is still listed while it stops.
const std::vector<api::WorkerLaunch> kFourGpuShared = {
    Rank(8, 1, 1, 1, 2, {2}), Rank(7, 2, 5, 1, 2, {1}), Rank(8, 1, 0, 0, 2, {0}),
    Rank(7, 2, 4, 0, 2, {3}), Rank(7, 1, 4, 0, 1, {2})};
// Four-GPU node, one job on all four GPUs (ranks 4..7 of 8), listed backwards.
const std::vector<api::WorkerLaunch> kFourGpuJob = {
    Rank(9, 1, 7, 3, 4, {3}), Rank(9, 1, 6, 2, 4, {2}), Rank(9, 1, 5, 1, 4, {1}),
    Rank(9, 1, 4, 0, 4, {0})};
// Four-GPU node: job 9 has two GPU ranks and one on the emulated device.
const std::vector<api::WorkerLaunch> kFourGpuMixedJob = {
    Rank(9, 1, 0, 0, 3, {0}), Rank(9, 1, 1, 1, 3, {4}), Rank(9, 1, 2, 2, 3, {1})};

INSTANTIATE_TEST_SUITE_P(
    Rows, NodeEnv,
    ::testing::Values(
        NodeRow{"two_gpus_rank0_sees_both_and_uses_cuda0", 2, kTwoGpuJob, kTwoGpuJob[0], 16,
                Sees("GPU-0,GPU-1", "cuda:0")},
        NodeRow{"two_gpus_rank1_uses_cuda_local_rank", 2, kTwoGpuJob, kTwoGpuJob[1], 16,
                Sees("GPU-0,GPU-1", "cuda:1")},
        NodeRow{"two_gpus_listed_in_local_rank_order", 2, kTwoGpuSwapped, kTwoGpuSwapped[0], 16,
                Sees("GPU-1,GPU-0", "cuda:1")},
        NodeRow{"launch_missing_from_desired_sees_its_siblings",
                2,
                {kTwoGpuJob[1]},
                kTwoGpuJob[0],
                16,
                Sees("GPU-0,GPU-1", "cuda:0")},
        NodeRow{"four_gpus_other_job_and_attempt_hidden", 4, kFourGpuShared, kFourGpuShared[1], 16,
                Sees("GPU-3,GPU-1", "cuda:1")},
        NodeRow{"four_gpus_other_job_sees_only_its_own", 4, kFourGpuShared, kFourGpuShared[2], 16,
                Sees("GPU-0,GPU-2", "cuda:0")},
        NodeRow{"four_gpus_one_job_in_local_rank_order",
                4,
                kFourGpuJob,
                kFourGpuJob[1],
                16,
                {{"CUDA_VISIBLE_DEVICES", "GPU-0,GPU-1,GPU-2,GPU-3"},
                 {"TESSERA_DEVICE", "cuda:2"},
                 {"OMP_NUM_THREADS", "4"}},
                {}},
        NodeRow{"four_gpus_emulated_rank_sees_no_gpu", 4, kFourGpuMixedJob, kFourGpuMixedJob[1], 16,
                Sees("", "cpu")},
        NodeRow{"four_gpus_emulated_sibling_adds_no_gpu", 4, kFourGpuMixedJob, kFourGpuMixedJob[2],
                16, Sees("GPU-0,GPU-1", "cuda:1")},
        NodeRow{"four_gpus_sibling_with_unknown_device_is_skipped",
                4,
                {Rank(9, 1, 0, 0, 2, {0}), Rank(9, 1, 1, 1, 2, {42})},
                Rank(9, 1, 0, 0, 2, {0}),
                16,
                Sees("GPU-0", "cuda:0")},
        NodeRow{"four_gpus_mixed_real_and_emulated_rank_refused",
                4,
                {Rank(9, 1, 0, 0, 1, {2, 4})},
                Rank(9, 1, 0, 0, 1, {2, 4}),
                16,
                {},
                {},
                "device_indices"},
        NodeRow{"threads_are_the_cores_shared_by_local_ranks", 2, kTwoGpuJob, kTwoGpuJob[0], 9,
                Threads("4")},
        NodeRow{"threads_at_least_one", 4, kFourGpuJob, kFourGpuJob[0], 3, Threads("1")},
        NodeRow{"threads_unknown_cores_is_one", 2, kTwoGpuJob, kTwoGpuJob[0], 0, Threads("1")},
        NodeRow{"threads_set_by_the_job_are_kept",
                2,
                kTwoGpuJob,
                WithEnv(kTwoGpuJob[0], "OMP_NUM_THREADS", "3"),
                16,
                {},
                {"OMP_NUM_THREADS"}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(FindDevice, ByIndexNotPosition) {
  api::Device a;
  a.index = 3;
  a.name = "three";
  api::Device b;
  b.index = 0;
  b.name = "zero";
  const std::vector<api::Device> devices = {a, b};
  struct Row {
    int64_t index;
    const char* name;  // nullptr: not found
  };
  const Row rows[] = {{3, "three"}, {0, "zero"}, {1, nullptr}, {-1, nullptr}};
  for (const Row& row : rows) {
    const api::Device* d = FindDevice(devices, row.index);
    if (row.name == nullptr) {
      EXPECT_EQ(d, nullptr) << row.index;
    } else {
      ASSERT_NE(d, nullptr) << row.index;
      EXPECT_EQ(d->name, row.name);
    }
  }
}

}  // namespace
}  // namespace tessera::launch
