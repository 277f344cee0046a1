#include "worker/runtime/data_source.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace tessera::worker {
namespace {

// Returns the ids it was asked for as the input tensor, and records every
// load (which thread, which range).
class RecordingSource : public BatchSource {
 public:
  struct Call {
    int64_t first, count;
    std::thread::id thread;
  };
  Result<SampleBatch> Load(int64_t first_id, int64_t count) override {
    {
      std::lock_guard lock(mu);
      calls.push_back({first_id, count, std::this_thread::get_id()});
    }
    SampleBatch b;
    b.input = torch::arange(first_id, first_id + count, torch::kLong);
    b.target = b.input * 2;
    return b;
  }
  std::mutex mu;
  std::vector<Call> calls;
};

TEST(PrefetchingSourceTest, ServesTheSameSamplesAndLoadsTheNextStepInTheBackground) {
  auto inner = std::make_unique<RecordingSource>();
  RecordingSource* rec = inner.get();
  auto source = MakePrefetchingSource(std::move(inner), /*stride=*/16);
  const auto main = std::this_thread::get_id();
  // Two micro-batches per step, five steps.
  for (int64_t step = 0; step < 5; ++step) {
    for (int64_t mb : {0, 6}) {
      const int64_t first = step * 16 + 4 + mb;
      auto b = source->Load(first, 6);
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      EXPECT_TRUE(torch::equal(b->input, torch::arange(first, first + 6, torch::kLong)));
      EXPECT_TRUE(torch::equal(b->target, b->input * 2));
    }
  }
  // Only the first step loaded on the calling thread; every later slice was
  // prepared ahead by a background thread, each exactly once.
  std::lock_guard lock(rec->mu);
  int on_main = 0;
  std::set<std::pair<int64_t, int64_t>> seen;
  for (const auto& c : rec->calls) {
    on_main += c.thread == main;
    EXPECT_TRUE(seen.insert({c.first, c.count}).second) << "loaded twice: " << c.first;
  }
  EXPECT_EQ(on_main, 2);
  EXPECT_GE(rec->calls.size(), 10u);
}

TEST(PrefetchingSourceTest, AnUnexpectedRequestIsLoadedAtOnce) {
  auto source = MakePrefetchingSource(std::make_unique<RecordingSource>(), 8);
  ASSERT_TRUE(source->Load(0, 4).ok());
  auto b = source->Load(100, 3);  // not the predicted 8..12
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(torch::equal(b->input, torch::arange(100, 103, torch::kLong)));
}

TEST(LoaderThreadsTest, ACudaRankSharesTheHostsThreadsAndACpuRankKeepsOne) {
  const torch::Device cpu(torch::kCPU);
  const torch::Device cuda(torch::kCUDA, 0);
  struct Row {
    int requested;
    torch::Device device;
    int local_world_size;
    unsigned hardware_threads;
    int want;
  };
  const Row rows[] = {
      {0, cpu, 1, 16, 1},    // the CPU (or an emulated device): its cores are the compute
      {0, cpu, 4, 64, 1},    //
      {3, cpu, 1, 16, 3},    // asked for
      {0, cuda, 1, 16, 15},  // all but the thread that launches the GPU work
      {0, cuda, 1, 64, 16},  // at most 16
      {0, cuda, 4, 16, 3},   // 16 threads among 4 local ranks
      {0, cuda, 8, 16, 1},   //
      {0, cuda, 8, 4, 1},    // fewer threads than ranks: still one
      {0, cuda, 1, 0, 1},    // unknown hardware
      {0, cuda, 0, 6, 5},    // local world size 0 counts as 1
      {12, cuda, 1, 16, 12},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(LoaderThreads(r.requested, r.device, r.local_world_size, r.hardware_threads), r.want)
        << "requested " << r.requested << " on " << r.device << ", " << r.local_world_size
        << " local ranks, " << r.hardware_threads << " hardware threads";
  }
}

}  // namespace
}  // namespace tessera::worker
