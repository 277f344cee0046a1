// Chunk sources: the in-memory queue's lease semantics (expiry by clock,
// crash release, completion records) and the HTTP source against a real
// loopback server (auth, retries with backoff, bounded failure).
#include "worker/runtime/chunk_source.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "common/fake_clock.h"
#include "tests/worker/runtime/lease_server_fixture.h"

namespace tessera::worker {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> Items(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back("img-" + std::to_string(i) + ".png");
  return out;
}

TEST(MemoryChunkQueueTest, SplitsLeasesAndFinishes) {
  FakeClock clock;
  auto q = MemoryChunkQueue::Create(Items(7), {.chunk_size = 3, .lease_ms = 1000, .clock = &clock});
  ASSERT_EQ(q->num_chunks(), 3);
  auto a = q->Lease(0, {}, 2);
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->chunks.size(), 2u);
  EXPECT_EQ(a->chunks[0].items, (std::vector<std::string>{"img-0.png", "img-1.png", "img-2.png"}));
  EXPECT_EQ(a->lease_ms, 1000);
  auto b = q->Lease(1, {}, 4);
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->chunks.size(), 1u);
  EXPECT_EQ(b->chunks[0].chunk, 2);
  EXPECT_EQ(b->chunks[0].items.size(), 1u);
  // Nothing left, not finished: come back later.
  auto c = q->Lease(1, {{2, 1, 0.5}}, 1);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->chunks.empty());
  EXPECT_FALSE(c->finished);
  EXPECT_GT(c->retry_after_ms, 0);
  auto d = q->Lease(0, {{0, 3, 1.0}, {1, 2, 1.0}}, 1);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->finished);
  const auto records = q->Records();
  EXPECT_EQ(records[1].images_reported, 2);
  for (const auto& r : records) {
    EXPECT_TRUE(r.done);
    EXPECT_EQ(r.times_completed, 1);
  }
  EXPECT_EQ(q->Lease(0, {{9, 1, 0}}, 1).status().code(), StatusCode::kInvalidArgument);
}

// The in-memory queue refuses the reports the controller refuses (the worker's
// tests run against it), naming the field, and records none of the call's chunks.
TEST(MemoryChunkQueueTest, RefusesTheReportsTheControllerRefuses) {
  struct Row {
    api::CompletedChunk report;
    std::string field;
  };
  const Row rows[] = {
      {{-1, 1, 0.5}, "chunk"},           {{0, -1, 0.5}, "images"},   {{0, 1, -0.001}, "seconds"},
      {{0, 1, std::nan("")}, "seconds"}, {{7, 1, 0.5}, "completed"},  // no such chunk
  };
  for (const Row& row : rows) {
    auto q = MemoryChunkQueue::Create(Items(7), {.chunk_size = 3});
    ASSERT_TRUE(q->Lease(0, {}, 3).ok());
    auto answer = q->Lease(0, {{1, 3, 0.5}, row.report}, 1);
    EXPECT_EQ(answer.status().code(), StatusCode::kInvalidArgument) << row.field;
    EXPECT_EQ(answer.status().field(), row.field);
    EXPECT_EQ(q->Records()[1].times_completed, 0) << row.field;
  }
}

TEST(MemoryChunkQueueTest, LeasesExpireUnlessRenewedAndCrashesRelease) {
  FakeClock clock;
  auto q = MemoryChunkQueue::Create(Items(4), {.chunk_size = 2, .lease_ms = 1000, .clock = &clock});
  ASSERT_EQ(q->Lease(0, {}, 1)->chunks.at(0).chunk, 0);
  clock.Advance(800ms);
  ASSERT_TRUE(q->Lease(0, {}, 0).ok());  // renews chunk 0
  clock.Advance(800ms);
  EXPECT_EQ(q->Lease(1, {}, 1)->chunks.at(0).chunk, 1);  // chunk 0 still held
  clock.Advance(1001ms);                                 // nobody renewed: both back
  auto again = q->Lease(2, {}, 2);
  ASSERT_EQ(again->chunks.size(), 2u);
  EXPECT_EQ(again->chunks[0].chunk, 0);
  q->ReleaseRank(2);  // rank 2 crashed
  EXPECT_EQ(q->Lease(3, {}, 1)->chunks.at(0).chunk, 0);
  EXPECT_EQ(q->Records()[0].times_leased, 3);
}

// As the controller: a call asking for chunks gets the chunks the rank
// still holds first (an answer lost in transit loses no work), counted in
// max_chunks, then free ones.
TEST(MemoryChunkQueueTest, HeldChunksAreSentAgainFirst) {
  FakeClock clock;
  auto q = MemoryChunkQueue::Create(Items(8), {.chunk_size = 2, .lease_ms = 1000, .clock = &clock});
  ASSERT_EQ(q->Lease(0, {}, 1)->chunks.at(0).chunk, 0);
  auto again = q->Lease(0, {}, 1);
  ASSERT_EQ(again->chunks.size(), 1u);
  EXPECT_EQ(again->chunks[0].chunk, 0);  // the answer was lost: the same chunk
  auto more = q->Lease(0, {}, 3);
  ASSERT_EQ(more->chunks.size(), 3u);
  EXPECT_EQ(more->chunks[0].chunk, 0);
  EXPECT_EQ(more->chunks[1].chunk, 1);
  EXPECT_EQ(more->chunks[2].chunk, 2);
  auto after_report = q->Lease(0, {{0, 2, 0.1}}, 3);
  ASSERT_EQ(after_report->chunks.size(), 3u);
  EXPECT_EQ(after_report->chunks[0].chunk, 1);
  EXPECT_EQ(after_report->chunks[2].chunk, 3);
  EXPECT_EQ(q->Records()[1].times_leased, 1);  // sent again, not leased again
}

class HttpChunkSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    queue_ = MemoryChunkQueue::Create(Items(5), {.chunk_size = 2});
    server_ = std::make_unique<testing::LeaseServer>(queue_, "secret", "42", 3);
    ASSERT_TRUE(server_->Start().ok());
  }
  HttpChunkSourceOptions Options() {
    HttpChunkSourceOptions o;
    o.controller_url = server_->url();
    o.token = "secret";
    o.job_id = "42";
    o.attempt = 3;
    o.rank = 1;
    o.first_backoff = 1ms;
    o.max_backoff = 4ms;
    return o;
  }
  std::shared_ptr<MemoryChunkQueue> queue_;
  std::unique_ptr<testing::LeaseServer> server_;
};

TEST_F(HttpChunkSourceTest, LeasesAndReportsOverHttp) {
  auto source = MakeHttpChunkSource(Options());
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  std::vector<api::CompletedChunk> done;
  std::vector<std::string> seen;
  for (int i = 0; i < 10; ++i) {
    auto r = (*source)->Lease(done, 1);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    done.clear();
    if (r->finished) break;
    for (const auto& c : r->chunks) {
      seen.insert(seen.end(), c.items.begin(), c.items.end());
      done.push_back({c.chunk, static_cast<int64_t>(c.items.size()), 0.1});
    }
  }
  EXPECT_EQ(seen, Items(5));
  for (const auto& r : queue_->Records()) EXPECT_EQ(r.times_completed, 1);
}

TEST_F(HttpChunkSourceTest, RetriesUnavailableControllerWithBackoff) {
  server_->FailNext(3);
  std::vector<std::chrono::milliseconds> sleeps;
  HttpChunkSourceOptions o = Options();
  o.sleep = [&sleeps](std::chrono::milliseconds d) { sleeps.push_back(d); };
  auto source = MakeHttpChunkSource(o);
  ASSERT_TRUE(source.ok());
  auto r = (*source)->Lease({}, 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->chunks.size(), 1u);
  EXPECT_EQ(sleeps, (std::vector<std::chrono::milliseconds>{1ms, 2ms, 4ms}));
  EXPECT_EQ(server_->requests(), 4);
}

TEST_F(HttpChunkSourceTest, ClientErrorsFailAtOnce) {
  struct Case {
    std::string token;
    int64_t attempt;
    StatusCode code;
  };
  for (const Case& c : {Case{"wrong", 3, StatusCode::kUnauthenticated},
                        Case{"secret", 2, StatusCode::kFailedPrecondition}}) {
    HttpChunkSourceOptions o = Options();
    o.token = c.token;
    o.attempt = c.attempt;
    auto source = MakeHttpChunkSource(o);
    ASSERT_TRUE(source.ok());
    const int before = server_->requests();
    EXPECT_EQ((*source)->Lease({}, 1).status().code(), c.code);
    EXPECT_EQ(server_->requests(), before + 1);  // no retry
  }
}

TEST_F(HttpChunkSourceTest, UnreachableControllerFailsAfterBoundedTime) {
  FakeClock clock;
  HttpChunkSourceOptions o = Options();
  o.controller_url = "http://127.0.0.1:1";  // nothing listens on port 1
  o.clock = &clock;
  o.retry_for = 10s;
  o.first_backoff = 500ms;
  o.max_backoff = 2s;
  int tries = 0;
  o.sleep = [&](std::chrono::milliseconds d) {
    ++tries;
    clock.Advance(d);
  };
  auto source = MakeHttpChunkSource(o);
  ASSERT_TRUE(source.ok());
  auto r = (*source)->Lease({}, 1);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("http://127.0.0.1:1"), std::string::npos);
  // 0.5 + 1 + 2 + 2 + 2 + 2 = 9.5 s waited; the next 2 s would pass 10 s.
  EXPECT_EQ(tries, 6);
}

TEST(HttpChunkSourceOptionsTest, BadSettingsAreInvalidArguments) {
  struct Case {
    std::string url, job;
    int64_t attempt;
    std::string field;
  };
  const Case cases[] = {{"ftp://x", "1", 1, "TESSERA_CONTROLLER_URL"},
                        {"http://", "1", 1, "TESSERA_CONTROLLER_URL"},
                        {"http://h:99999", "1", 1, "TESSERA_CONTROLLER_URL"},
                        {"http://h:70", "", 1, "TESSERA_JOB_ID"},
                        {"http://h:70", "1", 0, "TESSERA_ATTEMPT"}};
  for (const Case& c : cases) {
    HttpChunkSourceOptions o;
    o.controller_url = c.url;
    o.job_id = c.job;
    o.attempt = c.attempt;
    auto s = MakeHttpChunkSource(o);
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << c.url;
    EXPECT_EQ(s.status().field(), c.field) << c.url;
  }
  HttpChunkSourceOptions ok;
  ok.controller_url = "http://[::1]:7070/prefix/";
  ok.job_id = "7";
  ok.attempt = 1;
  EXPECT_TRUE(MakeHttpChunkSource(ok).ok());
}

}  // namespace
}  // namespace tessera::worker
