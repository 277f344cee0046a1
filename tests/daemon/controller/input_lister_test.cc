// InputLister against a real SQLite store and real files: listings run on
// their own thread, write chunks in batches, say how far they got, and fail
// with the reason.
#include "daemon/controller/input_lister.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon/store/sqlite_store.h"
#include "tests/daemon/temp_dir.h"

namespace tessera::daemon {
namespace {

using namespace std::chrono_literals;

// An item check that blocks at the `n`th image until Release(): a slow
// listing.
class BlockingCheck {
 public:
  explicit BlockingCheck(int n) : n_(n) {}
  InputPathCheck Check() {
    return [this](const std::string& path) {
      if (path.ends_with(".png") && ++checked_ == n_) released_.wait();
      return Status::Ok();
    };
  }
  void Release() { release_.set_value(); }

 private:
  const int n_;
  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
  std::atomic<int> checked_{0};
};

class InputListerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = SqliteStore::Open(dir_.File("t.db"));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = *std::move(store);
  }

  api::Job Job(const std::string& dataset) {
    api::JobSpec spec;
    spec.name = "infer";
    spec.kind = api::JobKind::kInfer;
    spec.entrypoint = "builtin:colorize-unet";
    spec.dataset = dataset;
    spec.global_batch = 1;
    auto job = store_->InsertJob(NewJob{"alice", spec, 1, "submitted"});
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return *job;
  }

  // `n` image files in a folder; returns the folder.
  std::string Images(int n) {
    auto folder = dir_.path() / "in";
    std::filesystem::create_directories(folder);
    for (int i = 0; i < n; ++i) std::ofstream(folder / ("img-" + std::to_string(100 + i) + ".png"));
    return folder.string();
  }

  // A list file naming `n` images of Images(n).
  std::string ListFile(int n) {
    const std::string folder = Images(n);
    const std::string path = dir_.File("list.txt");
    std::ofstream out(path);
    for (int i = 0; i < n; ++i) out << folder << "/img-" << 100 + i << ".png\n";
    return path;
  }

  // Polls until the listing is no longer running (20 s at most).
  InputLister::Progress WaitDone(InputLister& lister, const api::Job& job,
                                 const InputPathCheck& may_read = AnyPath) {
    InputLister::Progress p;
    for (auto end = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < end;
         std::this_thread::sleep_for(2ms)) {
      auto polled = lister.Poll(job, may_read);
      EXPECT_TRUE(polled.ok()) << polled.status().ToString();
      p = *polled;
      if (p.phase != InputLister::Phase::kListing) break;
    }
    return p;
  }

  // Polls until the listing has found `found` items (20 s at most); returns
  // the last progress.
  InputLister::Progress WaitFound(InputLister& lister, const api::Job& job,
                                  const InputPathCheck& may_read, int64_t found) {
    InputLister::Progress p;
    for (auto end = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < end;
         std::this_thread::sleep_for(2ms)) {
      p = *lister.Poll(job, may_read);
      if (p.found == found) break;
    }
    return p;
  }

  std::vector<std::string> AllItems(api::JobId job) {
    std::vector<std::string> out;
    auto chunks = store_->ListChunks(job);
    EXPECT_TRUE(chunks.ok()) << chunks.status().ToString();
    if (!chunks.ok()) return out;
    for (const InferChunk& c : *chunks) out.insert(out.end(), c.items.begin(), c.items.end());
    return out;
  }

  testing::TempDir dir_;
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(InputListerTest, ListsInBatchesAndSealsTheInput) {
  InputLister lister(store_.get(), {/*chunk_images=*/3, /*batch_chunks=*/2, /*sort_limit=*/100});
  api::Job job = Job(ListFile(10));
  InputLister::Progress p = WaitDone(lister, job);
  ASSERT_EQ(p.phase, InputLister::Phase::kDone) << p.error.ToString();
  EXPECT_EQ(p.found, 10);
  EXPECT_EQ(*store_->CountChunks(job.id), (ChunkCounts{4, 0, 0, 10, 0}));
  EXPECT_TRUE(*store_->ChunksSealed(job.id));
  auto chunks = store_->ListChunks(job.id);
  ASSERT_TRUE(chunks.ok());
  ASSERT_EQ(chunks->size(), 4u);
  EXPECT_EQ(chunks->back().items.size(), 1u);
  // A new lister (a restarted controller) finds the input done.
  InputLister again(store_.get(), {});
  auto polled = again.Poll(job, AnyPath);
  ASSERT_TRUE(polled.ok());
  EXPECT_EQ(polled->phase, InputLister::Phase::kDone);
  EXPECT_EQ(polled->found, 10);
}

TEST_F(InputListerTest, SaysHowManyItemsItFoundWhileItLists) {
  // The item check of the 6th line blocks until released: a slow listing.
  BlockingCheck blocking(6);
  const InputPathCheck slow = blocking.Check();
  InputLister lister(store_.get(), {2, 1, 100});
  api::Job job = Job(ListFile(8));
  InputLister::Progress p = WaitFound(lister, job, slow, 5);
  EXPECT_EQ(p.phase, InputLister::Phase::kListing);
  EXPECT_EQ(p.found, 5);
  EXPECT_FALSE(*store_->ChunksSealed(job.id)) << "not sealed while listing";
  blocking.Release();
  p = WaitDone(lister, job, slow);
  EXPECT_EQ(p.phase, InputLister::Phase::kDone);
  EXPECT_EQ(p.found, 8);
}

// Memory stays bounded: every full batch is in the store before the next
// item is read, so the lister holds at most batch_chunks x chunk_images
// items, however long the input.
TEST_F(InputListerTest, WritesEachFullBatchBeforeReadingOn) {
  // The item check of the 10th line blocks until released.
  BlockingCheck blocking(10);
  const InputPathCheck slow = blocking.Check();
  InputLister lister(store_.get(), {/*chunk_images=*/2, /*batch_chunks=*/2, /*sort_limit=*/100});
  api::Job job = Job(ListFile(11));
  WaitFound(lister, job, slow, 9);
  auto while_blocked = store_->CountChunks(job.id);
  auto sealed = store_->ChunksSealed(job.id);
  blocking.Release();  // before any assertion: the listing thread must not stay blocked
  // Items 1-8 are two batches of two chunks; the 9th waits in its chunk.
  ASSERT_TRUE(while_blocked.ok()) << while_blocked.status().ToString();
  EXPECT_EQ(while_blocked->chunks_total, 4);
  EXPECT_EQ(while_blocked->images_total, 8);
  EXPECT_FALSE(sealed.value_or(true));
  InputLister::Progress p = WaitDone(lister, job, slow);
  ASSERT_EQ(p.phase, InputLister::Phase::kDone) << p.error.ToString();
  auto counts = store_->CountChunks(job.id);
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->chunks_total, 6);
  EXPECT_EQ(counts->images_total, 11);
}

TEST_F(InputListerTest, AnInputThatCannotBeReadFailsWithTheReason) {
  InputLister lister(store_.get(), {});
  api::Job job = Job(dir_.File("no-such-folder"));
  InputLister::Progress p = WaitDone(lister, job);
  ASSERT_EQ(p.phase, InputLister::Phase::kFailed);
  EXPECT_NE(p.error.message().find("neither a folder nor a list file"), std::string::npos)
      << p.error.ToString();
  EXPECT_FALSE(*store_->ChunksSealed(job.id));
}

TEST_F(InputListerTest, AListingLeftUnsealedIsListedAgain) {
  api::Job job = Job(ListFile(4));
  // An earlier process wrote a batch and stopped before sealing.
  ASSERT_TRUE(store_->AppendChunks(job.id, 0, {{"stale.png"}}).ok());
  InputLister lister(store_.get(), {2, 8, 100});
  InputLister::Progress p = WaitDone(lister, job);
  ASSERT_EQ(p.phase, InputLister::Phase::kDone);
  EXPECT_EQ(*store_->CountChunks(job.id), (ChunkCounts{2, 0, 0, 4, 0}));
  EXPECT_EQ(AllItems(job.id).front().find("stale"), std::string::npos);
}

TEST_F(InputListerTest, AFolderIsSortedUpToTheLimitAndStreamedBeyondIt) {
  for (int64_t sort_limit : {100, 3}) {
    std::filesystem::remove_all(dir_.path() / "in");
    api::Job job = Job(Images(12));
    InputLister lister(store_.get(), {5, 1, sort_limit});
    ASSERT_EQ(WaitDone(lister, job).phase, InputLister::Phase::kDone);
    std::vector<std::string> items = AllItems(job.id);
    std::vector<std::string> sorted = items;
    std::sort(sorted.begin(), sorted.end());
    ASSERT_EQ(items.size(), 12u);
    EXPECT_EQ(std::set<std::string>(items.begin(), items.end()).size(), 12u);
    if (sort_limit == 100) {
      EXPECT_EQ(items, sorted);
    }
  }
}

}  // namespace
}  // namespace tessera::daemon
