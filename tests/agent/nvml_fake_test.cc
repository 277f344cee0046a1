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

// Builtin models are profiled once per GPU type (two A100s share one profile, the T4
// has its own), cached with the benchmark, measured again for another worker; a
// profile that fails leaves that type without one, nothing else; a device whose
// benchmark failed is not profiled.
TEST(NvmlFake, BuiltinModelsAreProfiledOncePerGpuTypeAndCached) {
  testing::TempDir state;
  std::vector<std::string> calls;
  InventoryOptions o;
  o.state_dir = state.path();
  o.nvml_library = TESSERA_FAKE_NVML_PATH;
  o.benchmark = [](const std::string&) -> Result<BenchmarkFigures> {
    return BenchmarkFigures{.tflops = 10, .tflops_half = 20, .mem_bandwidth_gbps = 500};
  };
  o.profile_models = {"colorize-unet", "denoiser-dncnn"};
  o.profile_version = "worker-1";
  o.profile = [&calls](const std::string& device, const std::string& model) -> Result<std::string> {
    calls.push_back(model + "@" + device);
    if (model == "denoiser-dncnn" && device == "cuda:2") return Internal("out of memory");
    return api::Json{{"model", model}, {"device", device}, {"layers", api::Json::array()}}.dump();
  };
  auto inv = SystemInventoryProvider(o).Load();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->devices.size(), 3u);
  EXPECT_EQ(calls, (std::vector<std::string>{"colorize-unet@cuda:0", "denoiser-dncnn@cuda:0",
                                             "colorize-unet@cuda:2", "denoiser-dncnn@cuda:2"}));
  for (int i : {0, 1}) {
    ASSERT_EQ(inv->devices[static_cast<size_t>(i)].profiles.size(), 2u) << i;
    EXPECT_EQ(inv->devices[static_cast<size_t>(i)].profiles.at("colorize-unet")["device"], "cuda:0")
        << "the A100s share device 0's profile";
  }
  ASSERT_EQ(inv->devices[2].profiles.size(), 1u) << "the T4's dncnn profile failed";
  EXPECT_EQ(inv->devices[2].profiles.at("colorize-unet")["device"], "cuda:2");
  EXPECT_TRUE(inv->devices[2].measure_error.empty());
  EXPECT_EQ(inv->devices[2].profile_error,
            "profile of denoiser-dncnn on cuda:2 failed: internal: out of memory");
  EXPECT_EQ(inv->devices[0].profile_error, "");

  // A restart reuses the cache (the failed one is measured again).
  calls.clear();
  auto again = SystemInventoryProvider(o).Load();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(calls, (std::vector<std::string>{"denoiser-dncnn@cuda:2"}));
  EXPECT_EQ(again->devices[0].profiles, inv->devices[0].profiles);
  // Another worker measures again.
  calls.clear();
  o.profile_version = "worker-2";
  ASSERT_TRUE(SystemInventoryProvider(o).Load().ok());
  EXPECT_EQ(calls.size(), 4u);

  // A device that could not be benchmarked is not profiled either.
  calls.clear();
  o.benchmark = [](const std::string& device) -> Result<BenchmarkFigures> {
    if (device == "cuda:2") return Internal("no luck");
    return BenchmarkFigures{.tflops = 10, .tflops_half = 20, .mem_bandwidth_gbps = 500};
  };
  o.rebenchmark = true;
  auto failed = SystemInventoryProvider(o).Load();
  ASSERT_TRUE(failed.ok());
  EXPECT_TRUE(failed->devices[2].profiles.empty());
  EXPECT_EQ(calls.size(), 2u) << "the A100 type only";
}

}  // namespace
}  // namespace tessera::agent
