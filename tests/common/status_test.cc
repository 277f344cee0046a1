#include "common/status.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("must be even", "x");
  return x / 2;
}

Result<int> Quarter(int x) {
  TESSERA_ASSIGN_OR_RETURN(int h, Half(x));
  TESSERA_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "ok");
}

TEST(StatusTest, CarriesCodeMessageAndField) {
  Status s = InvalidArgument("must be positive", "global_batch");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.field(), "global_batch");
  EXPECT_EQ(s.ToString(), "invalid_argument: global_batch: must be positive");
  EXPECT_EQ(s.WithPrefix("spec").message(), "spec: must be positive");
}

TEST(ResultTest, PropagatesFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> r = Quarter(6);  // 6 -> 3 -> odd
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().field(), "x");
  EXPECT_EQ(Quarter(5).value_or(-1), -1);
}

TEST(StatusTest, EveryCodeHasAName) {
  for (int c = 0; c <= static_cast<int>(StatusCode::kInternal); ++c) {
    EXPECT_NE(StatusCodeName(static_cast<StatusCode>(c)), "unknown") << c;
  }
}

}  // namespace
}  // namespace tessera
