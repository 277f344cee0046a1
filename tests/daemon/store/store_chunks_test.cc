// The Store suite over every backend (tests/daemon/store/store_test_fixture.h):
// inference chunks and their leases.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "daemon/store/store.h"
#include "tests/daemon/store/store_test_fixture.h"

namespace tessera::daemon::store_test {
namespace {

// ---- inference chunks ----

std::vector<std::vector<std::string>> ChunksOf(int chunks, int per_chunk) {
  std::vector<std::vector<std::string>> out(static_cast<size_t>(chunks));
  for (int c = 0; c < chunks; ++c) {
    for (int i = 0; i < per_chunk; ++i) {
      out[static_cast<size_t>(c)].push_back("img/" + std::to_string(c * per_chunk + i) + ".png");
    }
  }
  return out;
}

ChunkLeaseRequest LeaseBy(api::JobId job, int64_t attempt, int64_t rank, int64_t max, int64_t now,
                          std::vector<int64_t> completed = {}) {
  return ChunkLeaseRequest{job, attempt, rank, std::move(completed), max, now, now + 1000};
}

std::vector<int64_t> Numbers(const std::vector<InferChunk>& chunks) {
  std::vector<int64_t> out;
  for (const InferChunk& c : chunks) out.push_back(c.chunk);
  return out;
}

TEST_P(StoreTest, InsertChunksOnceAndCount) {
  api::Job job = Insert("alice", "infer");
  ASSERT_TRUE(store_->InsertChunks(job.id, ChunksOf(3, 4)).ok());
  EXPECT_EQ(store_->InsertChunks(job.id, ChunksOf(1, 1)).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->InsertChunks(999, ChunksOf(1, 1)).code(), StatusCode::kNotFound);
  EXPECT_EQ(*store_->CountChunks(job.id), (ChunkCounts{3, 0, 0, 12, 0}));
  EXPECT_EQ(*store_->CountChunks(999), ChunkCounts{});
  auto listed = store_->ListChunks(job.id);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 3u);
  EXPECT_EQ((*listed)[2].items, ChunksOf(3, 4)[2]);
  EXPECT_EQ((*listed)[2].state, ChunkState::kPending);
}

TEST_P(StoreTest, LeaseHandsOutEachChunkOnceLowestFirst) {
  api::Job job = Insert("alice", "infer");
  ASSERT_TRUE(store_->InsertChunks(job.id, ChunksOf(5, 2)).ok());
  auto a = store_->LeaseChunks(LeaseBy(job.id, 1, 0, 2, 100));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(Numbers(a->leased), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(a->leased[1].items, ChunksOf(5, 2)[1]);
  auto b = store_->LeaseChunks(LeaseBy(job.id, 1, 1, 10, 100));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Numbers(b->leased), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(b->counts.chunks_leased, 5);
  auto none = store_->LeaseChunks(LeaseBy(job.id, 1, 2, 10, 200));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->leased.empty());
}

TEST_P(StoreTest, CompletedChunksAreDoneOnceAndCounted) {
  api::Job job = Insert("alice", "infer");
  ASSERT_TRUE(store_->InsertChunks(job.id, ChunksOf(3, 4)).ok());
  ASSERT_TRUE(store_->LeaseChunks(LeaseBy(job.id, 1, 0, 2, 100)).ok());
  auto r = store_->LeaseChunks(LeaseBy(job.id, 1, 0, 0, 150, {0, 1}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->newly_done, 2);
  EXPECT_TRUE(r->leased.empty()) << "max_chunks 0 only reports";
  EXPECT_EQ(r->counts, (ChunkCounts{3, 2, 0, 12, 8}));
  // A retried report changes nothing; an unknown chunk is ignored.
  auto again = store_->LeaseChunks(LeaseBy(job.id, 1, 0, 0, 160, {0, 1, 77}));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->newly_done, 0);
  EXPECT_EQ(again->counts.chunks_done, 2);
  auto chunks = store_->ListChunks(job.id);
  ASSERT_TRUE(chunks.ok());
  EXPECT_EQ((*chunks)[0].state, ChunkState::kDone);
  EXPECT_EQ((*chunks)[0].done_ms, 150);
  // Done chunks are never leased again.
  auto rest = store_->LeaseChunks(LeaseBy(job.id, 1, 1, 10, 170));
  EXPECT_EQ(Numbers(rest->leased), (std::vector<int64_t>{2}));
}

TEST_P(StoreTest, ExpiredLeaseGoesBackToTheQueueAndRenewalKeepsIt) {
  api::Job job = Insert("alice", "infer");
  ASSERT_TRUE(store_->InsertChunks(job.id, ChunksOf(2, 1)).ok());
  // Rank 0 holds chunk 0 until 1100, rank 1 chunk 1 until 1100.
  ASSERT_TRUE(store_->LeaseChunks(LeaseBy(job.id, 1, 0, 1, 100)).ok());
  ASSERT_TRUE(store_->LeaseChunks(LeaseBy(job.id, 1, 1, 1, 100)).ok());
  // Rank 0 renews at 900 (until 1900); rank 1 goes silent.
  ASSERT_TRUE(store_->LeaseChunks(LeaseBy(job.id, 1, 0, 0, 900)).ok());
  auto before = store_->LeaseChunks(LeaseBy(job.id, 1, 2, 5, 1099));
  EXPECT_TRUE(before->leased.empty()) << "nothing has expired yet";
  auto after = store_->LeaseChunks(LeaseBy(job.id, 1, 2, 5, 1100));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(Numbers(after->leased), (std::vector<int64_t>{1})) << "rank 1's lease expired";
  EXPECT_EQ(after->leased[0].rank, 2);
}

TEST_P(StoreTest, LeasesOfAnEndedAttemptAreReclaimedAtOnce) {
  api::Job job = Insert("alice", "infer");
  ASSERT_TRUE(store_->InsertChunks(job.id, ChunksOf(3, 1)).ok());
  ASSERT_TRUE(store_->LeaseChunks(LeaseBy(job.id, 1, 0, 3, 100)).ok());
  ASSERT_TRUE(store_->LeaseChunks(LeaseBy(job.id, 1, 0, 0, 110, {0})).ok());
  auto next = store_->LeaseChunks(LeaseBy(job.id, 2, 0, 5, 120));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(Numbers(next->leased), (std::vector<int64_t>{1, 2}));
  auto stale = store_->LeaseChunks(LeaseBy(job.id, 1, 0, 5, 130));
  EXPECT_TRUE(stale->leased.empty()) << "an older attempt cannot take a newer one's lease";
}

TEST_P(StoreTest, AskingAgainResendsChunksTheRankNeverGot) {
  api::Job job = Insert("alice", "infer");
  ASSERT_TRUE(store_->InsertChunks(job.id, ChunksOf(4, 1)).ok());
  // Rank 0's answer granting chunks 0 and 1 is lost; it retries the call.
  ASSERT_TRUE(store_->LeaseChunks(LeaseBy(job.id, 1, 0, 2, 100)).ok());
  ASSERT_TRUE(store_->LeaseChunks(LeaseBy(job.id, 1, 1, 1, 100)).ok());  // rank 1: chunk 2
  auto retry = store_->LeaseChunks(LeaseBy(job.id, 1, 0, 2, 110));
  ASSERT_TRUE(retry.ok());
  EXPECT_EQ(Numbers(retry->leased), (std::vector<int64_t>{0, 1}));
  // Having finished 0, it asks for 2: it gets 1 again, then a new one.
  auto next = store_->LeaseChunks(LeaseBy(job.id, 1, 0, 2, 120, {0}));
  EXPECT_EQ(Numbers(next->leased), (std::vector<int64_t>{1, 3}));
  // A renewal (max_chunks 0) hands out nothing.
  EXPECT_TRUE(store_->LeaseChunks(LeaseBy(job.id, 1, 0, 0, 130))->leased.empty());
}

TEST_P(StoreTest, LeaseRefusesBadRequests) {
  api::Job job = Insert("alice", "infer");
  EXPECT_EQ(store_->LeaseChunks(LeaseBy(999, 1, 0, 1, 100)).status().code(), StatusCode::kNotFound);
  struct Case {
    ChunkLeaseRequest request;
    std::string field;
  } cases[] = {
      {ChunkLeaseRequest{job.id, 0, 0, {}, 1, 100, 200}, "attempt"},
      {ChunkLeaseRequest{job.id, 1, -1, {}, 1, 100, 200}, "rank"},
      {ChunkLeaseRequest{job.id, 1, 0, {}, -1, 100, 200}, "max_chunks"},
      {ChunkLeaseRequest{job.id, 1, 0, {}, 1, 100, 50}, "lease_until_ms"},
  };
  for (const Case& c : cases) {
    auto r = store_->LeaseChunks(c.request);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_EQ(r.status().field(), c.field);
  }
}

}  // namespace
}  // namespace tessera::daemon::store_test
