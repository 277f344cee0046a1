#include "worker/data/sharding.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "worker/data/rng.h"

namespace tessera::worker {
namespace {

Result<int64_t> SumShares(const std::vector<int64_t>& shares) {
  if (shares.empty()) return InvalidArgument("shares must not be empty", "shares");
  int64_t total = 0;
  for (size_t i = 0; i < shares.size(); ++i) {
    if (shares[i] < 1) {
      return InvalidArgument("every share must be positive", "shares[" + std::to_string(i) + "]");
    }
    total += shares[i];
  }
  return total;
}

// Sizes of each rank's slice of a window of `len` samples (len <= sum).
std::vector<int64_t> SliceSizes(const std::vector<int64_t>& shares, int64_t total, int64_t len) {
  if (len == total) return shares;
  std::vector<int64_t> sizes(shares.size());
  std::vector<std::pair<int64_t, size_t>> remainders;  // (remainder, rank)
  int64_t assigned = 0;
  for (size_t r = 0; r < shares.size(); ++r) {
    sizes[r] = shares[r] * len / total;
    assigned += sizes[r];
    remainders.emplace_back(shares[r] * len % total, r);
  }
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; assigned < len; ++i, ++assigned) ++sizes[remainders[i].second];
  return sizes;
}

}  // namespace

std::vector<int64_t> EpochPermutation(uint64_t seed, int64_t epoch, int64_t n) {
  std::vector<int64_t> perm(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::iota(perm.begin(), perm.end(), 0);
  Rng rng(MixSeeds({seed, static_cast<uint64_t>(epoch), 0x5348415244ull /* "SHARD" */}));
  for (size_t i = perm.size(); i > 1; --i) {
    std::swap(perm[i - 1], perm[rng.Below(i)]);
  }
  return perm;
}

Result<int64_t> StepsPerEpoch(int64_t n, const std::vector<int64_t>& shares) {
  TESSERA_ASSIGN_OR_RETURN(const int64_t total, SumShares(shares));
  if (n < 0) return InvalidArgument("dataset size must not be negative", "n");
  return (n + total - 1) / total;
}

Result<std::vector<int64_t>> ShardAtOffset(const std::vector<int64_t>& permutation, int64_t offset,
                                           const std::vector<int64_t>& shares, int rank) {
  TESSERA_ASSIGN_OR_RETURN(const int64_t total, SumShares(shares));
  if (rank < 0 || static_cast<size_t>(rank) >= shares.size()) {
    return InvalidArgument("rank out of range", "rank");
  }
  const auto n = static_cast<int64_t>(permutation.size());
  if (offset < 0 || offset >= n) return InvalidArgument("offset outside the epoch", "offset");
  const int64_t len = std::min(total, n - offset);
  const std::vector<int64_t> sizes = SliceSizes(shares, total, len);
  int64_t begin = offset;
  for (int r = 0; r < rank; ++r) begin += sizes[static_cast<size_t>(r)];
  return std::vector<int64_t>(permutation.begin() + begin,
                              permutation.begin() + begin + sizes[static_cast<size_t>(rank)]);
}

Result<std::vector<int64_t>> ShardForRank(const std::vector<int64_t>& permutation, int64_t step,
                                          const std::vector<int64_t>& shares, int rank) {
  const auto n = static_cast<int64_t>(permutation.size());
  TESSERA_ASSIGN_OR_RETURN(const int64_t steps, StepsPerEpoch(n, shares));
  if (step < 0 || step >= steps) return InvalidArgument("step outside the epoch", "step");
  const int64_t total = std::accumulate(shares.begin(), shares.end(), int64_t{0});
  return ShardAtOffset(permutation, step * total, shares, rank);
}

}  // namespace tessera::worker
