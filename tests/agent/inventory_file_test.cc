#include "agent/inventory_file.h"

#include <gtest/gtest.h>

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
                          "    tflops: 19.5\n"
                          "  - name: T4 (emulated)\n    memory: 16G\n    relative_speed: 0.25\n",
                          false,
                          {{"A100 (emulated)", 80LL << 30, 1.0, 19.5},
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
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().field(), row.field) << parsed.status().ToString();
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
        BadRow{"unknown_device_field", "devices: [{name: a, memory: 1G, sped: 2}]\n",
               "devices[0].sped"}),
    [](const auto& info) { return std::string(info.param.name); });

struct SizeRow {
  const char* text;
  std::optional<int64_t> bytes;
};

TEST(ParseByteSize, Table) {
  const SizeRow rows[] = {
      {"1024", 1024},          {"1K", 1024},
      {"1KiB", 1024},          {"1KB", 1000},
      {"16G", 16LL << 30},     {"16 GiB", 16LL << 30},
      {"1.5GiB", 3LL << 29},   {"2TB", 2'000'000'000'000LL},
      {"512mib", 512LL << 20}, {"", std::nullopt},
      {"G", std::nullopt},     {"1X", std::nullopt},
      {"1.5", std::nullopt},   {"1 G B", std::nullopt},
      {"-1G", std::nullopt},
  };
  for (const auto& row : rows) {
    EXPECT_EQ(ParseByteSize(row.text), row.bytes) << "'" << row.text << "'";
  }
}

}  // namespace
}  // namespace tessera::agent
