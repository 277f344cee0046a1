#include "common/hex.h"

#include <gtest/gtest.h>

#include <string>

namespace tessera {
namespace {

TEST(HexTest, EncodesTwoDigitsPerByteHighNibbleFirst) {
  struct Row {
    std::string bytes;
    const char* lower;
    const char* upper;
  };
  const Row rows[] = {
      {"", "", ""},
      {std::string("\x00", 1), "00", "00"},
      {"\x0f\xa0", "0fa0", "0FA0"},
      {"\xff\x01\x7f", "ff017f", "FF017F"},
      {"tessera", "74657373657261", "74657373657261"},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(HexEncode(row.bytes), row.lower) << row.lower;
    EXPECT_EQ(HexEncode(row.bytes, HexCase::kUpper), row.upper) << row.upper;
    const auto* data = reinterpret_cast<const unsigned char*>(row.bytes.data());
    EXPECT_EQ(HexEncode(data, row.bytes.size()), row.lower) << row.lower;
  }
}

TEST(HexTest, DecodesEitherCaseAndRoundTrips) {
  struct Row {
    const char* hex;
    std::string bytes;
  };
  const Row rows[] = {
      {"", ""},
      {"00", std::string("\x00", 1)},
      {"0fa0", "\x0f\xa0"},
      {"0FA0", "\x0f\xa0"},
      {"Ff017f", "\xff\x01\x7f"},
  };
  for (const Row& row : rows) {
    auto decoded = HexDecode(row.hex, "key");
    ASSERT_TRUE(decoded.ok()) << row.hex << ": " << decoded.status().ToString();
    EXPECT_EQ(*decoded, row.bytes) << row.hex;
  }
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  auto round = HexDecode(HexEncode(all));
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(*round, all);
}

TEST(HexTest, DecodeErrorsNameTheField) {
  for (const char* bad : {"0", "abc", "0g", "g0", "0x00", "  ", "a:b:"}) {
    auto decoded = HexDecode(bad, "lease_key");
    ASSERT_FALSE(decoded.ok()) << bad;
    EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(decoded.status().field(), "lease_key") << bad;
  }
}

TEST(HexTest, IsLowerHexAcceptsOnlyWhatEncodeWrites) {
  EXPECT_TRUE(IsLowerHex(""));
  EXPECT_TRUE(IsLowerHex("0123456789abcdef"));
  for (const char* bad : {"A", "0123456789abcdeF", "g", " ", "-1"}) {
    EXPECT_FALSE(IsLowerHex(bad)) << bad;
  }
}

}  // namespace
}  // namespace tessera
