#include "agent/worker_env.h"

#include <gtest/gtest.h>

namespace tessera::agent {
namespace {

NodeInventory Inventory() {
  NodeInventory inv;
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
  inv.devices = {gpu0, gpu1, emu, emu_fast, cpu};
  return inv;
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
  auto env = DeviceEnvFor(launch, Inventory());
  if (row.error_field) {
    ASSERT_FALSE(env.ok());
    EXPECT_EQ(env.status().field(), row.error_field);
    return;
  }
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  for (const auto& [k, v] : row.want) {
    ASSERT_TRUE(env->count(k)) << k;
    EXPECT_EQ(env->at(k), v) << k;
  }
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

}  // namespace
}  // namespace tessera::agent
