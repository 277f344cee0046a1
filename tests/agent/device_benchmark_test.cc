// The real LibTorch device benchmark (CPU here), alone and through the
// inventory. Its own executable: only it loads LibTorch.
#include "agent/device_benchmark.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "agent/inventory.h"
#include "tests/agent/test_util.h"

namespace tessera::agent {
namespace {

TEST(DeviceBenchmark, CpuMatmulAndCopyGiveFigures) {
  BenchmarkOptions o;
  o.matmul_budget = std::chrono::milliseconds(30);
  o.copy_budget = std::chrono::milliseconds(30);
  o.cpu_matmul_size = 128;
  o.cpu_copy_bytes = 4 << 20;
  auto f = RunDeviceBenchmark("cpu", o);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_GT(f->tflops, 0.0);
  EXPECT_GT(f->mem_bandwidth_gbps, 0.0);
  // LibTorch multiplies bf16 on any CPU; fp16 only on some (0 where it cannot).
  EXPECT_GT(f->tflops_bf16, 0.0);
  EXPECT_GE(f->tflops_fp16, 0.0);
  EXPECT_DOUBLE_EQ(f->tflops_half, std::max(f->tflops_fp16, f->tflops_bf16));
}

TEST(DeviceBenchmark, CudaNumbersDevicesByPciBusIdAsNvmlDoes) {
  for (const char* before : {static_cast<const char*>(nullptr), "FASTEST_FIRST", "PCI_BUS_ID"}) {
    if (before == nullptr) {
      ::unsetenv("CUDA_DEVICE_ORDER");
    } else {
      ::setenv("CUDA_DEVICE_ORDER", before, 1);
    }
    UsePciBusIdDeviceOrder();
    const char* now = std::getenv("CUDA_DEVICE_ORDER");
    ASSERT_NE(now, nullptr);
    EXPECT_STREQ(now, "PCI_BUS_ID") << (before ? before : "unset");
  }
}

TEST(DeviceBenchmark, BadDeviceIsAnErrorNotACrash) {
  EXPECT_FALSE(RunDeviceBenchmark("tpu:7").ok());
}

TEST(DeviceBenchmark, InventoryMeasuresCpuAndScalesEmulatedDevices) {
  testing::TempDir state;
  testing::WriteFile(state.path() / "inv.yaml",
                     "devices: [{name: half, memory: 1G, relative_speed: 0.5}]\n");
  InventoryOptions o;
  o.state_dir = state.path();
  o.inventory_file = state.path() / "inv.yaml";
  o.nvml_library = "libnvidia-ml-absent-for-tessera-tests.so.1";
  o.benchmark = [](const std::string& device) {
    BenchmarkOptions quick;
    quick.matmul_budget = std::chrono::milliseconds(30);
    quick.copy_budget = std::chrono::milliseconds(30);
    return RunDeviceBenchmark(device, quick);
  };
  SystemInventoryProvider provider(o);
  auto inv = provider.Load();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->devices.size(), 1u);
  EXPECT_GT(inv->devices[0].measured_tflops, 0.0);
  EXPECT_GT(inv->devices[0].mem_bandwidth_gbps, 0.0);
  EXPECT_TRUE(std::filesystem::exists(state.path() / "inventory-cache.json"));
}

}  // namespace
}  // namespace tessera::agent
