#include "common/quantities.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera {
namespace {

struct SizeRow {
  const char* text;
  std::optional<int64_t> bytes;
};

struct RateRow {
  const char* text;
  std::optional<double> value;  // nullopt: refused
};

void ExpectParses(std::optional<double> (*parse)(std::string_view), const RateRow& row) {
  std::optional<double> got = parse(row.text);
  ASSERT_EQ(got.has_value(), row.value.has_value()) << "'" << row.text << "'";
  if (got) {
    EXPECT_DOUBLE_EQ(*got, *row.value) << "'" << row.text << "'";
  }
}

TEST(ParseBandwidth, Table) {
  const RateRow rows[] = {
      {"100Mbit", 12.5e6},
      {"100mbit/s", 12.5e6},
      {"1Gbit", 125e6},
      {"8bit", 1},
      {"1Kibit", 128},
      {"1Tbit", 125e9},
      {"1MB", 1e6},
      {"1MiB", 1048576},
      {"1M", 1048576},
      {"1KB/s", 1000},
      {"1.5GB", 1.5e9},
      {"1250", 1250},
      {"1e3", 1000},
      {"2B", 2},
      {"", std::nullopt},
      {"Mbit", std::nullopt},
      {"0", std::nullopt},
      {"-1MB", std::nullopt},
      {"1Mb it", std::nullopt},
      {"1Xbit", std::nullopt},
      {"1bps", std::nullopt},
      {"1e", std::nullopt},
      {"0x10", std::nullopt},
      {"inf", std::nullopt},
  };
  for (const auto& row : rows) {
    ExpectParses(&ParseBandwidth, row);
  }
}

TEST(ParseDuration, Table) {
  const RateRow rows[] = {
      {"2ms", 2e-3},
      {"250us", 250e-6},
      {"1s", 1},
      {"0.5", 0.5},
      {"0", 0},
      {"7 ns", 7e-9},
      {"", std::nullopt},
      {"-1ms", std::nullopt},
      {"1h", std::nullopt},
      {"ms", std::nullopt},
  };
  for (const auto& row : rows) {
    ExpectParses(&ParseDuration, row);
  }
}

TEST(ParseWholeNumber, Table) {
  const SizeRow rows[] = {
      {"1024", 1024},
      {"0", 0},
      {"-3", -3},
      {"9223372036854775807", INT64_MAX},
      {"", std::nullopt},
      {"12a", std::nullopt},
      {" 1", std::nullopt},
      {"+1", std::nullopt},
      {"1.0", std::nullopt},
      {"9223372036854775808", std::nullopt},
  };
  for (const auto& row : rows) {
    EXPECT_EQ(ParseWholeNumber(row.text), row.bytes) << "'" << row.text << "'";
  }
}

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
}  // namespace tessera
