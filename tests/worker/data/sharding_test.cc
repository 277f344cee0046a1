#include "worker/data/sharding.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

namespace tessera::worker {
namespace {

TEST(EpochPermutationTest, DeterministicPermutationThatChangesPerEpoch) {
  const auto a = EpochPermutation(7, 0, 100);
  EXPECT_EQ(a, EpochPermutation(7, 0, 100));
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(100);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
  EXPECT_NE(a, iota) << "shuffled";
  EXPECT_NE(a, EpochPermutation(7, 1, 100));
  EXPECT_NE(a, EpochPermutation(8, 0, 100));
  EXPECT_TRUE(EpochPermutation(7, 0, 0).empty());
}

struct ShardCase {
  int64_t n;
  std::vector<int64_t> shares;
};

class ShardForRankTest : public ::testing::TestWithParam<ShardCase> {};

TEST_P(ShardForRankTest, EveryEpochSampleSeenExactlyOnceAcrossRanks) {
  const ShardCase& c = GetParam();
  const int64_t total = std::accumulate(c.shares.begin(), c.shares.end(), int64_t{0});
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    const auto perm = EpochPermutation(3, epoch, c.n);
    auto steps = StepsPerEpoch(c.n, c.shares);
    ASSERT_TRUE(steps.ok());
    EXPECT_EQ(*steps, (c.n + total - 1) / total);
    std::vector<int64_t> seen;
    for (int64_t step = 0; step < *steps; ++step) {
      std::vector<int64_t> window;
      for (size_t r = 0; r < c.shares.size(); ++r) {
        auto ids = ShardForRank(perm, step, c.shares, static_cast<int>(r));
        ASSERT_TRUE(ids.ok()) << ids.status().ToString();
        if ((step + 1) * total <= c.n) {
          EXPECT_EQ(static_cast<int64_t>(ids->size()), c.shares[r]) << "full step " << step;
        }
        window.insert(window.end(), ids->begin(), ids->end());
      }
      // The global batch is the contiguous window of the permutation, ranks in order.
      const int64_t begin = step * total;
      const int64_t end = std::min(c.n, begin + total);
      EXPECT_EQ(window, std::vector<int64_t>(perm.begin() + begin, perm.begin() + end));
      seen.insert(seen.end(), window.begin(), window.end());
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), c.n) << "no duplicates";
    EXPECT_EQ(static_cast<int64_t>(std::set<int64_t>(seen.begin(), seen.end()).size()), c.n);
  }
}

INSTANTIATE_TEST_SUITE_P(Shares, ShardForRankTest,
                         ::testing::Values(ShardCase{64, {4, 4}},     // even, divides
                                           ShardCase{70, {4, 4}},     // even, remainder
                                           ShardCase{64, {3, 1}},     // uneven 3:1
                                           ShardCase{101, {3, 1}},    // uneven, remainder
                                           ShardCase{50, {5, 2, 1}},  // three ranks
                                           ShardCase{3, {6, 2}},      // epoch < one batch
                                           ShardCase{17, {1}}));      // single rank

TEST(ShardForRankTest, ShortLastStepSplitsByShare) {
  const auto perm = EpochPermutation(1, 0, 10);  // G = 8: steps of 8 and 2
  auto r0 = ShardForRank(perm, 1, {6, 2}, 0);
  auto r1 = ShardForRank(perm, 1, {6, 2}, 1);
  ASSERT_TRUE(r0.ok() && r1.ok());
  EXPECT_EQ(r0->size() + r1->size(), 2u);
  EXPECT_GE(r0->size(), r1->size());
}

TEST(ShardForRankTest, ResumeAtOffsetWithNewShares) {
  // After 2 steps of shares {3,1} (offset 8), continue with shares {2,2}.
  const auto perm = EpochPermutation(9, 4, 20);
  std::set<int64_t> seen;
  for (int64_t step = 0; step < 2; ++step) {
    for (int r = 0; r < 2; ++r) {
      auto ids = ShardForRank(perm, step, {3, 1}, r);
      ASSERT_TRUE(ids.ok());
      for (int64_t id : *ids) seen.insert(id);
    }
  }
  for (int64_t offset = 8; offset < 20; offset += 4) {
    for (int r = 0; r < 2; ++r) {
      auto ids = ShardAtOffset(perm, offset, {2, 2}, r);
      ASSERT_TRUE(ids.ok());
      for (int64_t id : *ids) EXPECT_TRUE(seen.insert(id).second) << id;
    }
  }
  EXPECT_EQ(seen.size(), 20u);
}

TEST(ShardForRankTest, RejectsBadArguments) {
  const auto perm = EpochPermutation(1, 0, 10);
  struct Case {
    int64_t step;
    std::vector<int64_t> shares;
    int rank;
    std::string field;
  };
  for (const Case& c :
       {Case{0, {}, 0, "shares"}, Case{0, {2, 0}, 0, "shares[1]"}, Case{0, {2, 2}, 2, "rank"},
        Case{0, {2, 2}, -1, "rank"}, Case{3, {2, 2}, 0, "step"}, Case{-1, {2, 2}, 0, "step"}}) {
    auto r = ShardForRank(perm, c.step, c.shares, c.rank);
    ASSERT_FALSE(r.ok()) << c.field;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().field(), c.field);
  }
}

}  // namespace
}  // namespace tessera::worker
