#include "common/quantities.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

namespace tessera {
namespace {

// Checks `parse` on a table: each of `parsed` gives its value, each of
// `refused` gives nothing.
template <typename T>
void ExpectTable(std::optional<T> (*parse)(std::string_view),
                 std::initializer_list<std::pair<const char*, T>> parsed,
                 std::initializer_list<const char*> refused) {
  for (const auto& [text, value] : parsed) {
    std::optional<T> got = parse(text);
    EXPECT_TRUE(got.has_value()) << "'" << text << "'";
    if (!got) continue;
    if constexpr (std::is_floating_point_v<T>) {
      EXPECT_DOUBLE_EQ(*got, value) << "'" << text << "'";
    } else {
      EXPECT_EQ(*got, value) << "'" << text << "'";
    }
  }
  for (const char* text : refused) {
    EXPECT_EQ(parse(text), std::nullopt) << "'" << text << "'";
  }
}

TEST(ParseBandwidth, Table) {
  ExpectTable<double>(&ParseBandwidth,
                      {{"100Mbit", 12.5e6},
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
                       {"2B", 2}},
                      {"", "Mbit", "0", "-1MB", "1Mb it", "1Xbit", "1bps", "1e", "0x10", "inf"});
}

TEST(ParseDuration, Table) {
  ExpectTable<double>(
      &ParseDuration,
      {{"2ms", 2e-3}, {"250us", 250e-6}, {"1s", 1}, {"0.5", 0.5}, {"0", 0}, {"7 ns", 7e-9}},
      {"", "-1ms", "1h", "ms"});
}

TEST(ParseWholeNumber, Table) {
  ExpectTable<int64_t>(&ParseWholeNumber,
                       {{"1024", 1024}, {"0", 0}, {"-3", -3}, {"9223372036854775807", INT64_MAX}},
                       {"", "12a", " 1", "+1", "1.0", "9223372036854775808"});
}

TEST(ParseByteSize, Table) {
  ExpectTable<int64_t>(&ParseByteSize,
                       {{"1024", 1024},
                        {"1K", 1024},
                        {"1KiB", 1024},
                        {"1KB", 1000},
                        {"16G", 16LL << 30},
                        {"16 GiB", 16LL << 30},
                        {"1.5GiB", 3LL << 29},
                        {"2TB", 2'000'000'000'000LL},
                        {"512mib", 512LL << 20}},
                       {"", "G", "1X", "1.5", "1 G B", "-1G"});
}

}  // namespace
}  // namespace tessera
