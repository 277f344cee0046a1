// NVML discovery through a fake libnvidia-ml (tests/agent/fake_nvml.cc) that
// describes three GPUs this machine lacks.
#include <gtest/gtest.h>

#include "agent/inventory.h"
#include "agent/nvml_discovery.h"
#include "launch/worker_env.h"
#include "tests/agent/test_util.h"

namespace tessera::agent {
namespace {

TEST(NvmlFake, DiscoversGpusAndTheirLinks) {
  auto gpus = DiscoverNvmlGpus(TESSERA_FAKE_NVML_PATH);
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->devices.size(), 3u);
  const api::Device& d0 = gpus->devices[0];
  EXPECT_EQ(d0.type, "cuda");
  EXPECT_EQ(d0.name, "Fake A100-SXM4-80GB");
  EXPECT_EQ(d0.uuid, "GPU-fake-0");
  EXPECT_EQ(d0.memory_bytes, 80LL << 30);
  EXPECT_EQ(d0.memory_used_bytes, 1LL << 30);
  EXPECT_EQ(d0.compute_capability, "8.0");
  EXPECT_EQ(d0.sm_count, 108);
  EXPECT_FALSE(d0.emulated);
  EXPECT_EQ(gpus->devices[2].compute_capability, "7.5");
  EXPECT_DOUBLE_EQ(gpus->devices[2].utilization, 0.5);

  ASSERT_EQ(gpus->links.size(), 3u);
  EXPECT_EQ(gpus->links[0], (DeviceLink{0, 1, LinkKind::kNvLink, 2, "single"}));
  EXPECT_EQ(gpus->links[1], (DeviceLink{0, 2, LinkKind::kSystem, 0, "system"}));
  EXPECT_EQ(gpus->links[2], (DeviceLink{1, 2, LinkKind::kSystem, 0, "system"}));
}

TEST(NvmlFake, SystemInventoryUsesGpusInsteadOfCpuAndRefreshesUtilization) {
  testing::TempDir state;
  InventoryOptions o;
  o.state_dir = state.path();
  o.nvml_library = TESSERA_FAKE_NVML_PATH;
  SystemInventoryProvider provider(o);
  auto inv = provider.Load();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->devices.size(), 3u);
  EXPECT_EQ(inv->links.size(), 3u);
  inv->devices[1].utilization = 0.99;
  provider.Refresh(&*inv);
  EXPECT_DOUBLE_EQ(inv->devices[1].utilization, 0.25);

  api::WorkerLaunch launch;
  launch.device_indices = {1, 0};
  auto env = launch::DeviceEnvFor(launch, {}, inv->devices, 4);
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->at("CUDA_VISIBLE_DEVICES"), "GPU-fake-1,GPU-fake-0");
  EXPECT_EQ(env->at("TESSERA_DEVICE"), "cuda:0");
}

}  // namespace
}  // namespace tessera::agent
