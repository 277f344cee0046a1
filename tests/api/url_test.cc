#include "api/url.h"

#include <gtest/gtest.h>

namespace tessera::api {
namespace {

TEST(ParseTargetTest, SplitsPathAndDecodesQuery) {
  auto t = ParseTarget("/api/v1/jobs?owner=a%20b&state=running&x=1+2&flag");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->path, "/api/v1/jobs");
  EXPECT_EQ(t->query.at("owner"), "a b");
  EXPECT_EQ(t->query.at("x"), "1 2");
  EXPECT_EQ(t->query.at("flag"), "");
}

TEST(ParseTargetTest, RejectsRepeatedAndMalformed) {
  EXPECT_EQ(ParseTarget("/a?x=1&x=2").status().field(), "x");
  EXPECT_EQ(ParseTarget("/a?x=%4").status().field(), "x");
  EXPECT_EQ(ParseTarget("/a?x=%00").status().field(), "x");
  EXPECT_EQ(ParseTarget("/a?=3").status().field(), "query");
}

TEST(PercentTest, EncodeDecodeRoundTrip) {
  std::string raw = "cmd:train/x y?&=%";
  EXPECT_EQ(PercentDecode(PercentEncode(raw), false), raw);
  EXPECT_EQ(PercentEncode("builtin:a"), "builtin%3Aa");
}

TEST(SplitPathTest, KeepsEmptySegments) {
  EXPECT_EQ(SplitPath("/a/b").size(), 2u);
  EXPECT_EQ(SplitPath("/a//b").size(), 3u);
  EXPECT_EQ(SplitPath("/").size(), 0u);
  EXPECT_EQ(SplitPath("/a/").size(), 2u);
}

}  // namespace
}  // namespace tessera::api
