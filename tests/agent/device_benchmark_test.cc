// The real LibTorch device benchmark (CPU here), alone, through the inventory,
// and in its child process (tessera-device-bench), which is how the agent runs
// it. Its own executable: only it loads LibTorch.
#include "agent/device_benchmark.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "agent/benchmark_child.h"
#include "agent/gloo_link_benchmark.h"
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

BenchmarkChildOptions QuickChild() {
  BenchmarkChildOptions o;
  o.binary = TESSERA_DEVICE_BENCH_BINARY;
  o.args = {"--matmul-ms", "30", "--copy-ms", "30", "--cpu-matmul-size", "128"};
  return o;
}

TEST(BenchmarkChild, MeasuresTheCpuInAChildProcess) {
  auto f = RunBenchmarkChild(QuickChild(), "cpu");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_GT(f->tflops, 0.0);
  EXPECT_GT(f->mem_bandwidth_gbps, 0.0);
  EXPECT_DOUBLE_EQ(f->tflops_half, std::max(f->tflops_fp16, f->tflops_bf16));
}

TEST(BenchmarkChild, AGpuThisMachineLacksGivesTheChildsReason) {
  auto f = RunBenchmarkChild(QuickChild(), "cuda:0");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kUnavailable) << f.status().ToString();
  EXPECT_NE(f.status().message().find("CUDA is not available"), std::string::npos)
      << f.status().ToString();
}

TEST(BenchmarkChild, MissingBinaryHangAndGarbageAreErrorsWithReasons) {
  testing::TempDir dir;
  BenchmarkChildOptions missing;
  missing.binary = (dir.path() / "absent").string();
  EXPECT_EQ(RunBenchmarkChild(missing, "cpu").status().code(), StatusCode::kNotFound);

  testing::WriteFile(dir.path() / "hang.sh", "#!/bin/sh\nexec sleep 30\n");
  testing::WriteFile(dir.path() / "garbage.sh", "#!/bin/sh\necho segfault in driver\n");
  for (const char* name : {"hang.sh", "garbage.sh"}) {
    std::filesystem::permissions(dir.path() / name, std::filesystem::perms::owner_all);
  }
  BenchmarkChildOptions hang;
  hang.binary = (dir.path() / "hang.sh").string();
  hang.timeout = std::chrono::milliseconds(300);
  const auto t0 = std::chrono::steady_clock::now();
  auto hung = RunBenchmarkChild(hang, "cuda:0");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(hung.status().code(), StatusCode::kDeadlineExceeded) << hung.status().ToString();

  BenchmarkChildOptions garbage;
  garbage.binary = (dir.path() / "garbage.sh").string();
  auto bad = RunBenchmarkChild(garbage, "cuda:0");
  EXPECT_EQ(bad.status().code(), StatusCode::kInternal);
  EXPECT_NE(bad.status().message().find("segfault in driver"), std::string::npos)
      << bad.status().ToString();
}

// The agent's GPU profile child: the real worker's profile (on the CPU here; a GPU
// this machine lacks is the worker's reason), a profile after log lines, a worker
// that fails or prints no profile.
TEST(ProfileChild, RunsTheWorkersProfileAndReadsItsJson) {
  ProfileChildOptions o;
  o.worker_binary = TESSERA_WORKER_BINARY;
  auto text = RunProfileChild(o, "cpu", "denoiser-dncnn");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  const api::Json j = api::Json::parse(*text);
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["batch"], 8);
  EXPECT_TRUE(j["layers"][0].contains("fwd_fixed_ms")) << "--fixed-batch 2";

  // On a GPU machine the profile is the GPU's; here the worker's reason comes back.
  auto gpu = RunProfileChild(o, "cuda:0", "colorize-unet");
  if (gpu.ok()) {
    EXPECT_EQ(api::Json::parse(*gpu)["device"], "cuda:0");
  } else {
    EXPECT_EQ(gpu.status().code(), StatusCode::kInternal);
    EXPECT_NE(gpu.status().message().find("CUDA sees no GPU"), std::string::npos)
        << gpu.status().ToString();
  }

  testing::TempDir dir;
  testing::WriteFile(dir.path() / "logs.sh", R"(#!/bin/sh
echo 'loading {model}' >&2
echo '{'
echo " \"device\": \"$9\","
echo ' "layers": []'
echo '}'
)");
  testing::WriteFile(dir.path() / "fails.sh", "#!/bin/sh\necho 'bad model' >&2\nexit 2\n");
  testing::WriteFile(dir.path() / "silent.sh", "#!/bin/sh\necho done\n");
  for (const char* name : {"logs.sh", "fails.sh", "silent.sh"}) {
    std::filesystem::permissions(dir.path() / name, std::filesystem::perms::owner_all);
  }
  o.worker_binary = (dir.path() / "logs.sh").string();
  auto after_logs = RunProfileChild(o, "cuda:1", "colorize-unet");
  ASSERT_TRUE(after_logs.ok()) << after_logs.status().ToString();
  EXPECT_EQ(api::Json::parse(*after_logs)["device"], "cuda:1");
  o.worker_binary = (dir.path() / "fails.sh").string();
  auto failed = RunProfileChild(o, "cuda:0", "colorize-unet");
  EXPECT_EQ(failed.status().code(), StatusCode::kInternal);
  EXPECT_NE(failed.status().message().find("exited with status 2: bad model"), std::string::npos)
      << failed.status().ToString();
  o.worker_binary = (dir.path() / "silent.sh").string();
  auto silent = RunProfileChild(o, "cuda:0", "colorize-unet");
  EXPECT_NE(silent.status().message().find("printed no profile"), std::string::npos)
      << silent.status().ToString();
}

TEST(BenchmarkChild, OutputRoundTrips) {
  BenchmarkFigures f{1.5, 3.0, 2.0, 3.0, 800.0};
  auto back = ParseBenchmarkOutput("noise from a library\n" + FiguresToJsonLine(f) + "\n");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_DOUBLE_EQ(back->tflops, 1.5);
  EXPECT_DOUBLE_EQ(back->tflops_half, 3.0);
  EXPECT_DOUBLE_EQ(back->mem_bandwidth_gbps, 800.0);
  auto err = ParseBenchmarkOutput(ErrorToJsonLine(NotFound("cuda:3: CUDA sees 2 GPU(s)")));
  EXPECT_EQ(err.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(err.status().message(), "cuda:3: CUDA sees 2 GPU(s)");
}

// Two real processes all-reduce over loopback Gloo, as a job's ranks do.
TEST(GlooLinkChild, MeasuresTheLoopbackLinkBetweenTwoProcesses) {
  auto link = RunGlooLinkChild(QuickChild());
  ASSERT_TRUE(link.ok()) << link.status().ToString();
  EXPECT_GT(link->bandwidth_bytes_per_s, 0.0);
  EXPECT_GT(link->latency_s, 0.0);
  EXPECT_LT(link->latency_s, 1.0);
  EXPECT_GT(link->cpu_per_hop_s, 0.0);
}

TEST(GlooLinkFit, TwoRankRingFromTwoSizes) {
  struct Row {
    const char* name;
    int64_t small_bytes;
    double t_small;
    int64_t large_bytes;
    double t_large;
    bool ok;
    double bandwidth;
    double latency;
  } rows[] = {
      // t = bytes / bw + 2 x latency with bw 1e9, latency 1e-4.
      {"exact", 1000, 1e-6 + 2e-4, 1'001'000, 1e-3 + 1e-6 + 2e-4, true, 1e9, 1e-4},
      {"no_latency", 1000, 1e-6, 1'001'000, 1.001e-3, true, 1e9, 0},
      {"large_not_slower", 1000, 1e-3, 1'001'000, 1e-3, false, 0, 0},
      {"sizes_reversed", 2000, 1e-4, 1000, 1e-3, false, 0, 0},
      {"no_time", 1000, 0, 1'001'000, 1e-3, false, 0, 0},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    auto f = FitTwoRankRing(r.small_bytes, r.t_small, r.large_bytes, r.t_large);
    ASSERT_EQ(f.ok(), r.ok) << f.status().ToString();
    if (!r.ok) {
      EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
      continue;
    }
    EXPECT_NEAR(f->bandwidth_bytes_per_s, r.bandwidth, r.bandwidth * 1e-9);
    EXPECT_NEAR(f->latency_s, r.latency, 1e-12);
  }
}

TEST(GlooLinkChild, OutputRoundTripsAndOutOfRangeIsAnError) {
  const LinkFigures f{1e9, 2e-4, 3e-4};
  auto back = ParseLinkOutput("a library's line\n" + LinkToJsonLine(f) + "\n");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, f);
  EXPECT_EQ(ParseLinkOutput(R"({"bandwidth_bytes_per_s":0,"latency_s":1e-4})").status().code(),
            StatusCode::kInternal);
  EXPECT_EQ(ParseLinkOutput(ErrorToJsonLine(Unavailable("no loopback"))).status().message(),
            "no loopback");
}

// The inventory measures the loopback link for a node whose ranks talk Gloo, and
// a failed measurement leaves it unknown rather than failing the node.
TEST(GlooLinkInventory, EmulatedNodesCarryTheMeasuredLink) {
  testing::TempDir state;
  testing::WriteFile(state.path() / "inv.yaml",
                     "devices: [{name: half, memory: 1G, relative_speed: 0.5}]\n");
  struct Row {
    const char* name;
    bool measure;
    Result<LinkFigures> result;
    bool want_link;
  } rows[] = {
      {"measured", true, LinkFigures{1e9, 2e-4, 3e-4}, true},
      {"failed", true, Unavailable("peer did not start"), false},
      {"not_asked", false, LinkFigures{}, false},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    InventoryOptions o;
    o.inventory_file = state.path() / "inv.yaml";
    o.nvml_library = "libnvidia-ml-absent-for-tessera-tests.so.1";
    int calls = 0;
    if (r.measure) {
      o.gloo_link = [&] {
        ++calls;
        return r.result;
      };
    }
    SystemInventoryProvider provider(o);
    auto inv = provider.Load();
    ASSERT_TRUE(inv.ok()) << inv.status().ToString();
    EXPECT_EQ(calls, r.measure ? 1 : 0);
    ASSERT_EQ(inv->gloo_link.has_value(), r.want_link);
    if (r.want_link) {
      EXPECT_EQ(*inv->gloo_link, *r.result);
    }
  }
}

}  // namespace
}  // namespace tessera::agent
