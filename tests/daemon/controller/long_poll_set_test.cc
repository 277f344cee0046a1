// LongPollSet: parked polls answered on news, at their deadline, or at
// shutdown, by one thread however many are parked.
#include "daemon/controller/long_poll_set.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <vector>

namespace tessera::daemon {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

// Generous: every wait here is for something that must happen, never a
// measurement.
constexpr auto kMustHappen = 20s;

// One parked poll: whether it has news, and a future for its answer.
struct Parked {
  std::shared_ptr<std::atomic<bool>> news = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<std::promise<void>> answered = std::make_shared<std::promise<void>>();
  std::future<void> done = answered->get_future();
  std::shared_ptr<std::atomic<int>> answers = std::make_shared<std::atomic<int>>(0);

  void ParkIn(LongPollSet& set, Steady::duration wait, uint64_t seen) {
    set.Park(
        wait, seen, [news = news] { return news->load(); },
        [answered = answered, answers = answers] {
          if (answers->fetch_add(1) == 0) answered->set_value();
        });
  }
  bool Answered() { return done.wait_for(0s) == std::future_status::ready; }
};

int ThreadsOfThisProcess() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "Threads:") {
      int n = 0;
      status >> n;
      return n;
    }
    status.ignore(1 << 20, '\n');
  }
  return -1;
}

TEST(LongPollSetTest, AnswersAtTheDeadlineWithoutNews) {
  LongPollSet set;
  Parked p;
  p.ParkIn(set, 50ms, set.news_count());
  ASSERT_EQ(p.done.wait_for(kMustHappen), std::future_status::ready);
  EXPECT_EQ(*p.answers, 1);
  EXPECT_EQ(set.parked(), 0u);
}

TEST(LongPollSetTest, NewsAnswersOnlyThePollsItConcerns) {
  LongPollSet set;
  Parked quiet, busy;
  quiet.ParkIn(set, 1h, set.news_count());
  busy.ParkIn(set, 1h, set.news_count());
  *busy.news = true;
  set.Notify();
  ASSERT_EQ(busy.done.wait_for(kMustHappen), std::future_status::ready);
  // Both were looked at in the same pass; the quiet one stays parked.
  EXPECT_FALSE(quiet.Answered());
  EXPECT_EQ(set.parked(), 1u);
  *quiet.news = true;
  set.Notify();
  ASSERT_EQ(quiet.done.wait_for(kMustHappen), std::future_status::ready);
  EXPECT_EQ(*busy.answers, 1) << "answered once";
}

TEST(LongPollSetTest, NewsBetweenTheLookAndTheParkIsNotLost) {
  LongPollSet set;
  const uint64_t seen = set.news_count();
  set.Notify();  // a change lands after the poller looked, before it parks
  Parked p;
  *p.news = true;
  p.ParkIn(set, 1h, seen);
  ASSERT_EQ(p.done.wait_for(kMustHappen), std::future_status::ready);
}

TEST(LongPollSetTest, ShutdownAnswersEveryPollAndLaterOnesAtOnce) {
  LongPollSet set;
  std::vector<Parked> polls(10);
  for (Parked& p : polls) p.ParkIn(set, 1h, set.news_count());
  set.Shutdown();
  for (Parked& p : polls) ASSERT_EQ(p.done.wait_for(kMustHappen), std::future_status::ready);
  Parked late;
  late.ParkIn(set, 1h, set.news_count());
  EXPECT_TRUE(late.Answered()) << "answered inside Park";
}

TEST(LongPollSetTest, DestructorAnswersWhatIsLeft) {
  Parked p;
  {
    LongPollSet set;
    p.ParkIn(set, 1h, set.news_count());
  }
  EXPECT_TRUE(p.Answered());
}

TEST(LongPollSetTest, AThousandParkedPollsTakeNoThreadEach) {
  LongPollSet set;
  const int before = ThreadsOfThisProcess();
  ASSERT_GT(before, 0);
  std::vector<Parked> polls(1000);
  for (Parked& p : polls) p.ParkIn(set, 1h, set.news_count());
  EXPECT_EQ(set.parked(), 1000u);
  EXPECT_EQ(ThreadsOfThisProcess(), before);
  for (size_t i = 0; i < polls.size(); i += 2) *polls[i].news = true;
  set.Notify();
  for (size_t i = 0; i < polls.size(); i += 2) {
    ASSERT_EQ(polls[i].done.wait_for(kMustHappen), std::future_status::ready);
  }
  EXPECT_EQ(set.parked(), 500u);
}

}  // namespace
}  // namespace tessera::daemon
