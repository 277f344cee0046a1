#include "worker/data/prefetch_loader.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

namespace tessera::worker {
namespace {

// Items finish out of order (later indices are faster), yet arrive in order.
TEST(PrefetchLoaderTest, DeliversEveryItemInOrderWithinTheBound) {
  std::atomic<int> outstanding{0}, max_outstanding{0};
  std::atomic<int> produced{0};
  const int64_t capacity = 2;
  {
    PrefetchLoader<int64_t> loader(
        [&](int64_t i) -> Result<int64_t> {
          const int now = ++outstanding;
          int prev = max_outstanding.load();
          while (now > prev && !max_outstanding.compare_exchange_weak(prev, now)) {
          }
          std::this_thread::sleep_for(std::chrono::microseconds(200 * ((7 - i % 7))));
          ++produced;
          return i * 10;
        },
        40, /*threads=*/6, capacity);
    for (int64_t i = 0; i < 40; ++i) {
      auto item = loader.Next();
      ASSERT_TRUE(item.ok()) << item.status().ToString();
      ASSERT_TRUE(item->has_value());
      EXPECT_EQ(**item, i * 10);
      --outstanding;  // handed out
    }
    auto end = loader.Next();
    ASSERT_TRUE(end.ok());
    EXPECT_FALSE(end->has_value());
  }
  EXPECT_EQ(produced.load(), 40);
  // The consumer counts an item as handed out just after Next() returns, so
  // one more may appear outstanding; unbounded, all 6 threads would be busy.
  EXPECT_LE(max_outstanding.load(), capacity + 1);
  EXPECT_GE(max_outstanding.load(), 2) << "work happens in parallel ahead of the consumer";
}

TEST(PrefetchLoaderTest, ErrorsAndExceptionsBecomeStatusInPlace) {
  struct Case {
    bool throws;
    StatusCode code;
  };
  for (const Case& c :
       {Case{false, StatusCode::kInvalidArgument}, Case{true, StatusCode::kInternal}}) {
    PrefetchLoader<int> loader(
        [&](int64_t i) -> Result<int> {
          if (i == 5) {
            if (c.throws) throw std::runtime_error("boom");
            return InvalidArgument("bad sample");
          }
          return static_cast<int>(i);
        },
        20, 3, 4);
    for (int i = 0; i < 5; ++i) {
      auto item = loader.Next();
      ASSERT_TRUE(item.ok());
      EXPECT_EQ(**item, i);
    }
    auto failed = loader.Next();
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.status().code(), c.code);
    EXPECT_FALSE(loader.Next().ok()) << "the loader stays failed";
  }
}

TEST(PrefetchLoaderTest, DestroyingMidwayStopsWorkers) {
  std::atomic<int> produced{0};
  {
    PrefetchLoader<int> loader(
        [&](int64_t i) -> Result<int> {
          ++produced;
          return static_cast<int>(i);
        },
        1000000, 2, 2);
    ASSERT_TRUE(loader.Next().ok());
  }  // must not hang or produce the remaining items
  EXPECT_LT(produced.load(), 10);

  PrefetchLoader<int> stopped([](int64_t) -> Result<int> { return 1; }, 0, 1, 1);
  auto none = stopped.Next();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

}  // namespace
}  // namespace tessera::worker
