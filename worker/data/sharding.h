// Deterministic epoch order and the split of each global batch among
// data-parallel ranks with uneven shares.
//
// Rule: epoch e visits EpochPermutation(seed, e, n). The global batch of a
// step is the next contiguous window of that permutation, G = sum(shares)
// samples long; rank r takes the slice of the window that starts after the
// shares of ranks 0..r-1 and is shares[r] long. So in every epoch each
// sample is seen exactly once over all ranks, whatever the shares.
// The last step of an epoch may be short (n % G samples): it is split in
// proportion to the shares (largest remainder, ties to the lower rank), and a
// rank may then get fewer samples, or none.
//
// ShardAtOffset is the same rule starting at an arbitrary sample offset in
// the permutation, for resuming after the shares changed mid-epoch (the data
// position to checkpoint is the offset, not the step).
//
// Thread safety: pure functions.
#ifndef TESSERA_WORKER_DATA_SHARDING_H_
#define TESSERA_WORKER_DATA_SHARDING_H_

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace tessera::worker {

// A permutation of [0, n), the same for the same (seed, epoch, n).
std::vector<int64_t> EpochPermutation(uint64_t seed, int64_t epoch, int64_t n);

// ceil(n / sum(shares)); 0 for n == 0. kInvalidArgument for bad shares.
Result<int64_t> StepsPerEpoch(int64_t n, const std::vector<int64_t>& shares);

// Sample ids of `rank` at `step`. kInvalidArgument when shares is empty or
// has a non-positive entry, rank is out of range, or step is outside
// [0, StepsPerEpoch).
Result<std::vector<int64_t>> ShardForRank(const std::vector<int64_t>& permutation, int64_t step,
                                          const std::vector<int64_t>& shares, int rank);

// Same rule for a global batch starting at `offset` (0 <= offset < n).
Result<std::vector<int64_t>> ShardAtOffset(const std::vector<int64_t>& permutation, int64_t offset,
                                           const std::vector<int64_t>& shares, int rank);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_DATA_SHARDING_H_
