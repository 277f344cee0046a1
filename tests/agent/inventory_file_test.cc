#include "agent/inventory_file.h"

#include <gtest/gtest.h>

#include "tests/common/status_assertions.h"

namespace tessera::agent {
namespace {

struct GoodRow {
  const char* name;
  const char* text;
  bool combine;
  std::vector<EmulatedDeviceSpec> devices;
};

class InventoryFileGood : public ::testing::TestWithParam<GoodRow> {};

TEST_P(InventoryFileGood, Parses) {
  const GoodRow& row = GetParam();
  auto parsed = ParseInventoryFile(row.text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->combine, row.combine);
  EXPECT_EQ(parsed->devices, row.devices);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, InventoryFileGood,
    ::testing::Values(GoodRow{"minimal",
                              "devices:\n  - name: small\n    memory: 1024\n",
                              false,
                              {{"small", 1024, 1.0, std::nullopt}}},
                      GoodRow{
                          "units_speed_tflops",
                          "devices:\n"
                          "  - name: A100 (emulated)\n    memory: 80GiB\n    relative_speed: 1.0\n"
                          "    tflops: 19.5\n    tflops_half: 312\n"
                          "  - name: T4 (emulated)\n    memory: 16G\n    relative_speed: 0.25\n",
                          false,
                          {{"A100 (emulated)", 80LL << 30, 1.0, 19.5, 312.0},
                           {"T4 (emulated)", 16LL << 30, 0.25, std::nullopt}}},
                      GoodRow{"json",
                              R"({"combine": true, "devices": [{"name": "x", "memory": "512MiB",
                             "relative_speed": 0.5}]})",
                              true,
                              {{"x", 512LL << 20, 0.5, std::nullopt}}},
                      GoodRow{"decimal_units",
                              "combine: false\ndevices: [{name: d, memory: 2GB}]\n",
                              false,
                              {{"d", 2'000'000'000, 1.0, std::nullopt}}}),
    [](const auto& info) { return std::string(info.param.name); });

struct BadRow {
  const char* name;
  const char* text;
  const char* field;  // Status::field() of the error
};

class InventoryFileBad : public ::testing::TestWithParam<BadRow> {};

TEST_P(InventoryFileBad, NamesTheField) {
  const BadRow& row = GetParam();
  auto parsed = ParseInventoryFile(row.text);
  ASSERT_FALSE(parsed.ok());
  EXPECT_TRUE(::tessera::testing::InvalidArgumentNaming(parsed.status(), row.field));
}

INSTANTIATE_TEST_SUITE_P(
    Rows, InventoryFileBad,
    ::testing::Values(
        BadRow{"not_yaml", "devices: [name: x\n", ""}, BadRow{"not_a_mapping", "- a\n- b\n", ""},
        BadRow{"no_devices", "combine: true\n", "devices"},
        BadRow{"devices_not_list", "devices: 3\n", "devices"},
        BadRow{"devices_empty", "devices: []\n", "devices"},
        BadRow{"unknown_top_level", "device: []\n", "device"},
        BadRow{"combine_not_bool", "combine: maybe\ndevices: [{name: a, memory: 1}]\n", "combine"},
        BadRow{"device_not_mapping", "devices: [3]\n", "devices[0]"},
        BadRow{"missing_name", "devices: [{memory: 1G}]\n", "devices[0].name"},
        BadRow{"empty_name", "devices: [{name: '', memory: 1G}]\n", "devices[0].name"},
        BadRow{"missing_memory", "devices: [{name: a}]\n", "devices[0].memory"},
        BadRow{"bad_memory", "devices: [{name: a, memory: 1G}, {name: b, memory: lots}]\n",
               "devices[1].memory"},
        BadRow{"zero_memory", "devices: [{name: a, memory: 0}]\n", "devices[0].memory"},
        BadRow{"negative_memory", "devices: [{name: a, memory: -5}]\n", "devices[0].memory"},
        BadRow{"speed_zero", "devices: [{name: a, memory: 1G, relative_speed: 0}]\n",
               "devices[0].relative_speed"},
        BadRow{"speed_text", "devices: [{name: a, memory: 1G, relative_speed: fast}]\n",
               "devices[0].relative_speed"},
        BadRow{"tflops_negative", "devices: [{name: a, memory: 1G, tflops: -1}]\n",
               "devices[0].tflops"},
        BadRow{"tflops_half_zero", "devices: [{name: a, memory: 1G, tflops_half: 0}]\n",
               "devices[0].tflops_half"},
        BadRow{"unknown_device_field", "devices: [{name: a, memory: 1G, sped: 2}]\n",
               "devices[0].sped"}),
    [](const auto& info) { return std::string(info.param.name); });

// The optional `network:` key: the node's declared link.
struct NetworkRow {
  const char* name;
  const char* network;  // the value of `network:` (flow style)
  double bandwidth_bytes_per_s;
  double latency_s;
};

class InventoryFileNetwork : public ::testing::TestWithParam<NetworkRow> {};

TEST_P(InventoryFileNetwork, Parses) {
  const NetworkRow& row = GetParam();
  auto parsed = ParseInventoryFile(std::string("devices: [{name: a, memory: 1G}]\nnetwork: ") +
                                   row.network + "\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_TRUE(parsed->network.has_value());
  EXPECT_DOUBLE_EQ(parsed->network->bandwidth_bytes_per_s, row.bandwidth_bytes_per_s);
  EXPECT_DOUBLE_EQ(parsed->network->latency_s, row.latency_s);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, InventoryFileNetwork,
    ::testing::Values(
        NetworkRow{"megabits_milliseconds", "{bandwidth: 100Mbit, latency: 2ms}", 12.5e6, 2e-3},
        NetworkRow{"gigabits_per_s_microseconds", "{bandwidth: 10Gbit/s, latency: 50us}", 1.25e9,
                   50e-6},
        NetworkRow{"decimal_bytes", "{bandwidth: 12.5MB, latency: 0.001s}", 12.5e6, 1e-3},
        NetworkRow{"binary_bytes_per_s", "{bandwidth: 1GiB/s, latency: 0}", 1073741824.0, 0},
        NetworkRow{"plain_number_is_bytes", "{bandwidth: 1.25e9, latency: 2.5e-3}", 1.25e9, 2.5e-3},
        NetworkRow{"block_style_and_case", "\n  bandwidth: 20MBIT\n  latency: 5 ms", 2.5e6, 5e-3},
        NetworkRow{"json", R"({"bandwidth": "1Kibit", "latency": "1ns"})", 128, 1e-9}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(InventoryFile, NetworkAbsentMeansUnknown) {
  auto parsed = ParseInventoryFile("devices: [{name: a, memory: 1G}]\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_FALSE(parsed->network.has_value());
}

INSTANTIATE_TEST_SUITE_P(
    NetworkRows, InventoryFileBad,
    ::testing::Values(
        BadRow{"network_not_mapping", "devices: [{name: a, memory: 1G}]\nnetwork: 1Gbit\n",
               "network"},
        BadRow{"network_empty", "devices: [{name: a, memory: 1G}]\nnetwork:\n", "network"},
        BadRow{"bandwidth_missing", "devices: [{name: a, memory: 1G}]\nnetwork: {latency: 1ms}\n",
               "network.bandwidth"},
        BadRow{"latency_missing", "devices: [{name: a, memory: 1G}]\nnetwork: {bandwidth: 1Gbit}\n",
               "network.latency"},
        BadRow{"bandwidth_zero",
               "devices: [{name: a, memory: 1G}]\nnetwork: {bandwidth: 0Mbit, latency: 1ms}\n",
               "network.bandwidth"},
        BadRow{"bandwidth_negative",
               "devices: [{name: a, memory: 1G}]\nnetwork: {bandwidth: -5MB, latency: 1ms}\n",
               "network.bandwidth"},
        BadRow{"bandwidth_unknown_unit",
               "devices: [{name: a, memory: 1G}]\nnetwork: {bandwidth: 5Xbit, latency: 1ms}\n",
               "network.bandwidth"},
        BadRow{"bandwidth_list",
               "devices: [{name: a, memory: 1G}]\nnetwork: {bandwidth: [1], latency: 1ms}\n",
               "network.bandwidth"},
        BadRow{"latency_negative",
               "devices: [{name: a, memory: 1G}]\nnetwork: {bandwidth: 1Gbit, latency: -1ms}\n",
               "network.latency"},
        BadRow{"latency_unknown_unit",
               "devices: [{name: a, memory: 1G}]\nnetwork: {bandwidth: 1Gbit, latency: 3min}\n",
               "network.latency"},
        BadRow{"latency_too_long",
               "devices: [{name: a, memory: 1G}]\nnetwork: {bandwidth: 1Gbit, latency: 11s}\n",
               "network.latency"},
        BadRow{"unknown_network_field",
               "devices: [{name: a, memory: 1G}]\n"
               "network: {bandwidth: 1Gbit, latency: 1ms, jitter: 1ms}\n",
               "network.jitter"}),
    [](const auto& info) { return std::string(info.param.name); });

struct CapacityRow {
  const char* name;
  std::vector<double> speeds;
  double host_cores;
  bool fits;
};

class EmulationCapacity : public ::testing::TestWithParam<CapacityRow> {};

TEST_P(EmulationCapacity, SpeedsMustFitTheHostCores) {
  const CapacityRow& row = GetParam();
  InventoryFile file;
  for (double s : row.speeds) file.devices.push_back({"emulated", int64_t{1} << 30, s, {}});
  Status s = CheckEmulationCapacity(file, row.host_cores);
  EXPECT_EQ(s.ok(), row.fits) << s.ToString();
  if (!row.fits) {
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(s.field(), "devices");
    EXPECT_NE(s.message().find("add up to"), std::string::npos) << s.message();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Rows, EmulationCapacity,
    ::testing::Values(CapacityRow{"one_full_core", {1.0}, 2, true},
                      CapacityRow{"exactly_the_cores", {1.0, 0.5, 0.5}, 2, true},
                      CapacityRow{"mix_under", {0.5, 0.175, 0.5, 0.175}, 2, true},
                      CapacityRow{"demo_lab_before", {1.0, 1.0, 0.8, 0.35, 0.35}, 2, false},
                      CapacityRow{"two_full_on_one_core", {1.0, 1.0}, 1, false},
                      CapacityRow{"no_core_count_skips", {5.0}, 0, true}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tessera::agent
