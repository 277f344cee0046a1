#include "scheduler/batch_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace tessera::scheduler {
namespace {

struct SplitCase {
  std::string name;
  std::vector<double> secs;
  std::vector<int64_t> caps;
  int64_t total;
  int64_t min_share;
  std::optional<std::vector<int64_t>> want;
};

class SplitTableTest : public ::testing::TestWithParam<SplitCase> {};

TEST_P(SplitTableTest, Splits) {
  const SplitCase& c = GetParam();
  auto got = SplitBatchLinear(c.total, c.secs, c.caps, c.min_share);
  ASSERT_EQ(got.has_value(), c.want.has_value());
  if (got) {
    EXPECT_EQ(*got, *c.want);
  }
}

constexpr int64_t kBig = 1 << 30;

INSTANTIATE_TEST_SUITE_P(
    Table, SplitTableTest,
    ::testing::Values(
        SplitCase{"identical_even",
                  {1, 1, 1, 1},
                  {kBig, kBig, kBig, kBig},
                  16,
                  1,
                  std::vector<int64_t>{4, 4, 4, 4}},
        SplitCase{"identical_remainder",
                  {1, 1, 1, 1},
                  {kBig, kBig, kBig, kBig},
                  18,
                  1,
                  std::vector<int64_t>{5, 5, 4, 4}},
        SplitCase{"three_times_faster", {3, 1}, {kBig, kBig}, 8, 1, std::vector<int64_t>{2, 6}},
        SplitCase{"memory_cap_binds", {1, 1}, {2, kBig}, 10, 1, std::vector<int64_t>{2, 8}},
        SplitCase{"one_device", {2}, {kBig}, 7, 1, std::vector<int64_t>{7}},
        SplitCase{"caps_too_small", {1, 1}, {2, 3}, 10, 1, std::nullopt},
        SplitCase{"batch_smaller_than_devices",
                  {1, 1, 1, 1},
                  {kBig, kBig, kBig, kBig},
                  3,
                  1,
                  std::nullopt},
        SplitCase{"min_share_per_micro_batches",
                  {1, 10},
                  {kBig, kBig},
                  8,
                  2,
                  std::vector<int64_t>{6, 2}}),
    [](const auto& info) { return info.param.name; });

// Brute force over every composition: the split's slowest participant is optimal.
TEST(SplitBatchTest, MatchesBruteForceOnSmallTables) {
  const std::vector<std::vector<double>> speeds = {
      {1, 2, 3}, {1.5, 1.5, 4}, {0.7, 1.1, 2.9}, {5, 1, 1}, {1, 1, 1}};
  const std::vector<std::vector<int64_t>> caps = {
      {kBig, kBig, kBig}, {3, kBig, kBig}, {9, 4, kBig}};
  for (const auto& secs : speeds) {
    for (const auto& cap : caps) {
      for (int64_t total = 3; total <= 14; ++total) {
        double best = 1e300;
        for (int64_t a = 1; a <= total; ++a) {
          for (int64_t b = 1; a + b < total; ++b) {
            const int64_t c = total - a - b;
            if (a > cap[0] || b > cap[1] || c > cap[2]) continue;
            best = std::min(best, std::max({a * secs[0], b * secs[1], c * secs[2]}));
          }
        }
        auto got = SplitBatchLinear(total, secs, cap, 1);
        if (best == 1e300) {
          EXPECT_FALSE(got.has_value());
          continue;
        }
        ASSERT_TRUE(got.has_value());
        EXPECT_EQ(std::accumulate(got->begin(), got->end(), int64_t{0}), total);
        double worst = 0;
        for (int i = 0; i < 3; ++i) {
          EXPECT_LE((*got)[i], cap[i]);
          worst = std::max(worst, (*got)[i] * secs[i]);
        }
        EXPECT_NEAR(worst, best, 1e-9) << "total " << total;
      }
    }
  }
}

TEST(SplitBatchTest, GenericCostsWithOffsets) {
  // cost_i(s) = offset_i + s * slope_i: a replica with a fixed pipeline cost.
  const std::vector<double> offset = {5, 0};
  const std::vector<double> slope = {1, 1};
  SplitCosts c;
  c.count = 2;
  c.caps = {100, 100};
  c.cost = [&](int i, int64_t s) { return offset[i] + s * slope[i]; };
  c.max_share_within = [&](int i, double level) {
    return static_cast<int64_t>(std::floor((level - offset[i]) / slope[i]));
  };
  auto got = SplitBatch(15, c);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, (std::vector<int64_t>{5, 10}));
}

}  // namespace
}  // namespace tessera::scheduler
