#include "agent/inventory.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

#include "agent/benchmark_cache.h"
#include "agent/cpu_discovery.h"
#include "agent/device_benchmark.h"
#include "agent/nvml_discovery.h"
#include "common/faulty_file_system.h"
#include "tests/agent/test_util.h"

namespace tessera::agent {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

TEST(CpuDiscovery, RealProcGivesOneCpuDevice) {
  auto cpu = DiscoverCpuDevice();
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  EXPECT_EQ(cpu->type, "cpu");
  EXPECT_EQ(cpu->index, 0);
  EXPECT_FALSE(cpu->name.empty());
  EXPECT_GT(cpu->memory_bytes, 0);
  EXPECT_FALSE(cpu->emulated);
}

TEST(CpuDiscovery, ReadsModelNameAndMemTotal) {
  TempDir proc;
  WriteFile(proc.path() / "cpuinfo",
            "processor\t: 0\nmodel name\t: Test CPU 9000 @ 3.00GHz\n\n"
            "processor\t: 1\nmodel name\t: Test CPU 9000 @ 3.00GHz\n");
  WriteFile(proc.path() / "meminfo",
            "MemTotal:        2048 kB\nMemFree:  100 kB\nMemAvailable:    1024 kB\n");
  auto cpu = DiscoverCpuDevice(proc.path());
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  EXPECT_EQ(cpu->name, "Test CPU 9000 @ 3.00GHz");
  EXPECT_EQ(cpu->memory_bytes, 2048 * 1024);
  EXPECT_EQ(cpu->memory_used_bytes, 1024 * 1024);
}

TEST(CpuDiscovery, MissingMeminfoIsAnError) {
  TempDir proc;
  WriteFile(proc.path() / "cpuinfo", "model name : x\n");
  EXPECT_FALSE(DiscoverCpuDevice(proc.path()).ok());
}

TEST(NvmlDiscovery, AbsentLibraryMeansNoGpusNotAnError) {
  auto gpus = DiscoverNvmlGpus("libnvidia-ml-absent-for-tessera-tests.so.1");
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  EXPECT_TRUE(gpus->devices.empty());
  EXPECT_TRUE(gpus->links.empty());
}

TEST(NvmlDiscovery, LibraryWithoutNvmlSymbolsIsAnError) {
  auto gpus = DiscoverNvmlGpus("libm.so.6");
  ASSERT_FALSE(gpus.ok());
  EXPECT_NE(gpus.status().message().find("nvmlInit"), std::string::npos)
      << gpus.status().ToString();
}

InventoryOptions Options(const TempDir& state, const std::filesystem::path& file = {}) {
  InventoryOptions o;
  o.state_dir = state.path();
  o.inventory_file = file;
  o.nvml_library = "libnvidia-ml-absent-for-tessera-tests.so.1";
  return o;
}

TEST(SystemInventory, WithoutGpuOffersTheCpu) {
  TempDir state;
  SystemInventoryProvider provider(Options(state));
  auto inv = provider.Load();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->devices.size(), 1u);
  EXPECT_EQ(inv->devices[0].type, "cpu");
  EXPECT_TRUE(inv->links.empty());
}

TEST(SystemInventory, FileDevicesReplaceDiscovery) {
  TempDir state;
  WriteFile(state.path() / "inv.yaml",
            "devices:\n  - {name: big, memory: 80GiB}\n"
            "  - {name: small, memory: 16GiB, relative_speed: 0.5}\n");
  SystemInventoryProvider provider(Options(state, state.path() / "inv.yaml"));
  auto inv = provider.Load();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->devices.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(inv->devices[i].index, i);
    EXPECT_EQ(inv->devices[i].type, "cuda");
    EXPECT_TRUE(inv->devices[i].emulated);
  }
  EXPECT_EQ(inv->devices[1].name, "small");
  EXPECT_EQ(inv->devices[1].memory_bytes, 16LL << 30);
  EXPECT_DOUBLE_EQ(inv->devices[1].relative_speed, 0.5);
}

TEST(SystemInventory, FileNetworkLinkReachesTheInventory) {
  TempDir state;
  WriteFile(state.path() / "inv.yaml",
            "devices: [{name: e, memory: 1G}]\nnetwork: {bandwidth: 20Mbit, latency: 5ms}\n");
  SystemInventoryProvider provider(Options(state, state.path() / "inv.yaml"));
  auto inv = provider.Load();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_TRUE(inv->network.has_value());
  EXPECT_DOUBLE_EQ(inv->network->bandwidth_bytes_per_s, 2.5e6);
  EXPECT_DOUBLE_EQ(inv->network->latency_s, 0.005);
  // Without a file the link is unknown.
  SystemInventoryProvider none(Options(state));
  auto discovered = none.Load();
  ASSERT_TRUE(discovered.ok()) << discovered.status().ToString();
  EXPECT_FALSE(discovered->network.has_value());
}

TEST(SystemInventory, CombineAddsFileDevicesAfterDiscovered) {
  TempDir state;
  WriteFile(state.path() / "inv.yaml", "combine: true\ndevices: [{name: e, memory: 1G}]\n");
  SystemInventoryProvider provider(Options(state, state.path() / "inv.yaml"));
  auto inv = provider.Load();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->devices.size(), 2u);
  EXPECT_EQ(inv->devices[0].type, "cpu");
  EXPECT_TRUE(inv->devices[1].emulated);
  EXPECT_EQ(inv->devices[1].index, 1);
}

TEST(SystemInventory, BadFileRefusesWithFieldAndPath) {
  TempDir state;
  WriteFile(state.path() / "inv.yaml", "devices: [{name: e, memory: 1G, relative_speed: -1}]\n");
  SystemInventoryProvider provider(Options(state, state.path() / "inv.yaml"));
  auto inv = provider.Load();
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.status().field(), "devices[0].relative_speed");
  EXPECT_NE(inv.status().message().find("inv.yaml"), std::string::npos);
}

TEST(SystemInventory, MissingFileRefuses) {
  TempDir state;
  SystemInventoryProvider provider(Options(state, state.path() / "nope.yaml"));
  EXPECT_FALSE(provider.Load().ok());
}

// A benchmark that counts its calls and reports fixed figures.
struct CountingBenchmark {
  int calls = 0;
  BenchmarkFigures figures{
      .tflops = 3.0, .tflops_half = 9.0, .tflops_bf16 = 9.0, .mem_bandwidth_gbps = 30.0};
  DeviceBenchmarkFn Fn() {
    return [this](const std::string& device) -> Result<BenchmarkFigures> {
      ++calls;
      if (device != "cpu") return Unimplemented("only cpu here");
      return figures;
    };
  }
};

// The agent's benchmark cache in `state`.
std::filesystem::path CacheFile(const TempDir& state) {
  return state.path() / "inventory-cache.json";
}

// Leaves `figures` for `device` in the cache, as an earlier start would have.
Status SeedCache(const TempDir& state, const api::Device& device, const BenchmarkFigures& figures) {
  BenchmarkCache seeded(CacheFile(state));
  seeded.Put(BenchmarkCache::KeyFor(device), figures);
  return seeded.Save();
}

// What the cache file holds for `device` now.
std::optional<BenchmarkFigures> CachedFigures(const TempDir& state, const api::Device& device) {
  BenchmarkCache reread(CacheFile(state));
  reread.Load();
  return reread.Get(BenchmarkCache::KeyFor(device));
}

TEST(SystemInventory, CachedBenchmarkIsReusedAndScaledForEmulatedDevices) {
  TempDir state;
  auto cpu = DiscoverCpuDevice();
  ASSERT_TRUE(cpu.ok());
  const BenchmarkFigures seeded{
      .tflops = 2.0, .tflops_half = 5.0, .tflops_fp16 = 5.0, .mem_bandwidth_gbps = 10.0};
  ASSERT_TRUE(SeedCache(state, *cpu, seeded).ok());
  WriteFile(state.path() / "inv.yaml",
            "combine: true\ndevices:\n  - {name: half, memory: 1G, relative_speed: 0.5}\n"
            "  - {name: declared, memory: 1G, relative_speed: 2, tflops: 7, tflops_half: 28}\n");
  CountingBenchmark bench;
  InventoryOptions o = Options(state, state.path() / "inv.yaml");
  o.benchmark = bench.Fn();
  o.host_cores = 4;  // speeds 0.5 + 2 fit a 4-core host
  SystemInventoryProvider provider(o);
  auto inv = provider.Load();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->devices.size(), 3u);
  EXPECT_EQ(bench.calls, 0);  // everything came from the cache
  EXPECT_DOUBLE_EQ(inv->devices[0].measured_tflops, 2.0);
  EXPECT_DOUBLE_EQ(inv->devices[0].mem_bandwidth_gbps, 10.0);
  EXPECT_DOUBLE_EQ(inv->devices[0].measured_tflops_half, 5.0);
  // Emulated: CPU figures x relative_speed, or the declared TFLOPS; 16-bit only
  // when declared (an emulated device computes in float32 whatever the job asks).
  EXPECT_DOUBLE_EQ(inv->devices[1].measured_tflops, 1.0);
  EXPECT_DOUBLE_EQ(inv->devices[1].mem_bandwidth_gbps, 5.0);
  EXPECT_DOUBLE_EQ(inv->devices[1].measured_tflops_half, 0.0);
  EXPECT_DOUBLE_EQ(inv->devices[2].measured_tflops, 7.0);
  EXPECT_DOUBLE_EQ(inv->devices[2].measured_tflops_half, 28.0);
  EXPECT_DOUBLE_EQ(inv->devices[2].mem_bandwidth_gbps, 20.0);
}

TEST(SystemInventory, RefusesEmulatedSpeedsOverTheHostsCores) {
  TempDir state;
  WriteFile(state.path() / "inv.yaml",
            "devices:\n  - {name: a, memory: 1G, relative_speed: 0.8}\n"
            "  - {name: b, memory: 1G, relative_speed: 0.8}\n");
  InventoryOptions o = Options(state, state.path() / "inv.yaml");
  o.host_cores = 1;
  auto inv = SystemInventoryProvider(o).Load();
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(inv.status().field(), "devices");
  EXPECT_NE(inv.status().message().find("add up to 1.6 but this host has 1 cores"),
            std::string::npos)
      << inv.status().message();
  o.host_cores = 2;
  EXPECT_TRUE(SystemInventoryProvider(o).Load().ok()) << "1.6 fits 2 cores";
}

TEST(SystemInventory, FirstStartMeasuresOnceAndCaches) {
  TempDir state;
  CountingBenchmark bench;
  InventoryOptions o = Options(state);
  o.benchmark = bench.Fn();
  {
    SystemInventoryProvider provider(o);
    auto inv = provider.Load();
    ASSERT_TRUE(inv.ok());
    EXPECT_DOUBLE_EQ(inv->devices[0].measured_tflops, 3.0);
    EXPECT_DOUBLE_EQ(inv->devices[0].measured_tflops_half, 9.0);
  }
  EXPECT_EQ(bench.calls, 1);
  SystemInventoryProvider restarted(o);
  ASSERT_TRUE(restarted.Load().ok());
  EXPECT_EQ(bench.calls, 1);  // the restart reused the cache file
}

TEST(SystemInventory, CacheWrittenBeforeHalfPrecisionWasMeasuredIsMeasuredAgain) {
  TempDir state;
  auto cpu = DiscoverCpuDevice();
  ASSERT_TRUE(cpu.ok());
  WriteFile(CacheFile(state), "{\"version\": 1, \"devices\": {\"" + BenchmarkCache::KeyFor(*cpu) +
                                  "\": {\"tflops\": 1.5, \"mem_bandwidth_gbps\": 7}}}\n");
  CountingBenchmark bench;
  InventoryOptions o = Options(state);
  o.benchmark = bench.Fn();
  auto inv = SystemInventoryProvider(o).Load();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(bench.calls, 1);
  EXPECT_DOUBLE_EQ(inv->devices[0].measured_tflops, 3.0);
  EXPECT_DOUBLE_EQ(inv->devices[0].measured_tflops_half, 9.0);
  auto cached = CachedFigures(state, *cpu);
  ASSERT_TRUE(cached.has_value());
  EXPECT_DOUBLE_EQ(cached->tflops_bf16, 9.0);
  EXPECT_DOUBLE_EQ(cached->tflops_fp16, 0.0);
}

TEST(SystemInventory, RebenchmarkMeasuresAgainAndUpdatesTheCache) {
  TempDir state;
  auto cpu = DiscoverCpuDevice();
  ASSERT_TRUE(cpu.ok());
  const BenchmarkFigures stale{
      .tflops = 1234.0, .tflops_half = 1234.0, .mem_bandwidth_gbps = 1234.0};
  ASSERT_TRUE(SeedCache(state, *cpu, stale).ok());
  CountingBenchmark bench;
  InventoryOptions o = Options(state);
  o.benchmark = bench.Fn();
  o.rebenchmark = true;
  SystemInventoryProvider provider(o);
  auto inv = provider.Load();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(bench.calls, 1);
  EXPECT_DOUBLE_EQ(inv->devices[0].measured_tflops, 3.0);
  auto cached = CachedFigures(state, *cpu);
  ASSERT_TRUE(cached.has_value());
  EXPECT_DOUBLE_EQ(cached->tflops, 3.0);
}

TEST(SystemInventory, FailedBenchmarkLeavesZeroFiguresNotAnError) {
  TempDir state;
  InventoryOptions o = Options(state);
  o.benchmark = [](const std::string&) -> Result<BenchmarkFigures> { return Internal("no luck"); };
  SystemInventoryProvider provider(o);
  auto inv = provider.Load();
  ASSERT_TRUE(inv.ok());
  EXPECT_DOUBLE_EQ(inv->devices[0].measured_tflops, 0.0);
  // ... and the device carries the reason to the controller, the CLI and the planner.
  EXPECT_EQ(inv->devices[0].measure_error, "benchmark of cpu failed: internal: no luck");
}

// A save whose fsync or rename fails returns the error naming the file,
// which keeps its previous figures (the agent logs it and measures again on
// its next start).
TEST(BenchmarkCache, SaveThatCannotBeWrittenSurfacesAndKeepsTheOldFile) {
  struct Case {
    FileOp op;
    int err;
  };
  for (const Case& c : {Case{FileOp::kSync, EIO}, Case{FileOp::kRename, ENOSPC}}) {
    TempDir state;
    const std::filesystem::path file = state.path() / "inventory-cache.json";
    BenchmarkCache first(file);
    first.Put("cpu:x", BenchmarkFigures{.tflops = 1.0, .tflops_half = 2.0});
    ASSERT_TRUE(first.Save().ok());
    const std::string before = ReadFile(file);

    FaultyFileSystem faulty;
    faulty.FailNext(c.op, "inventory-cache.json", c.err);
    BenchmarkCache cache(file, &faulty);
    cache.Load();
    cache.Put("cpu:x", BenchmarkFigures{.tflops = 3.0, .tflops_half = 6.0});
    Status saved = cache.Save();
    ASSERT_FALSE(saved.ok());
    EXPECT_EQ(faulty.fired(), 1);
    EXPECT_EQ(saved.message().rfind("cannot write " + file.string() + ": ", 0), 0u)
        << saved.message();
    EXPECT_NE(saved.message().find(std::strerror(c.err)), std::string::npos) << saved.message();
    EXPECT_EQ(ReadFile(file), before);
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(state.path()),
                            std::filesystem::directory_iterator()),
              1);                    // no temporary file left
    ASSERT_TRUE(cache.Save().ok());  // the disk is back: saved
    BenchmarkCache reread(file);
    reread.Load();
    EXPECT_DOUBLE_EQ(reread.Get("cpu:x")->tflops, 3.0);
  }
}

TEST(BenchmarkCache, DamagedFileIsAnEmptyCache) {
  TempDir state;
  WriteFile(state.path() / "c.json", "{not json");
  BenchmarkCache cache(state.path() / "c.json");
  cache.Load();
  EXPECT_FALSE(cache.Get("cpu:x").has_value());
}

}  // namespace
}  // namespace tessera::agent
