#include "common/mutex.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessera {
namespace {

// Whether another thread can take `mu` right now (it lets go at once).
bool FreeElsewhere(Mutex& mu) {
  return std::async(std::launch::async,
                    [&mu] {
                      if (!mu.TryLock()) return false;
                      mu.Unlock();
                      return true;
                    })
      .get();
}

TEST(MutexTest, HeldOnlyWhileAMutexLockLives) {
  Mutex mu;
  EXPECT_TRUE(FreeElsewhere(mu));
  {
    MutexLock lock(mu);
    EXPECT_FALSE(FreeElsewhere(mu));
  }
  EXPECT_TRUE(FreeElsewhere(mu));
}

TEST(MutexTest, MutexLockLetsGoAndTakesAgainInsideItsScope) {
  Mutex mu;
  MutexLock lock(mu);
  lock.Unlock();
  EXPECT_TRUE(FreeElsewhere(mu));
  lock.Lock();
  EXPECT_FALSE(FreeElsewhere(mu));
}

// Each way of holding a Mutex, by name: every one excludes another thread.
TEST(MutexTest, EveryWayOfHoldingItExcludesOthers) {
  struct Case {
    std::string name;
    std::function<bool(Mutex&)> free_while_held;
  };
  const std::vector<Case> cases = {
      {"Lock/Unlock",
       [](Mutex& mu) {
         mu.Lock();
         const bool free = FreeElsewhere(mu);
         mu.Unlock();
         return free;
       }},
      {"TryLock",
       [](Mutex& mu) {
         if (!mu.TryLock()) return true;
         const bool free = FreeElsewhere(mu);
         mu.Unlock();
         return free;
       }},
      {"std::unique_lock",
       [](Mutex& mu) {
         std::unique_lock<Mutex> lock(mu);
         return FreeElsewhere(mu);
       }},
      {"std::scoped_lock",
       [](Mutex& mu) {
         std::scoped_lock lock(mu);
         return FreeElsewhere(mu);
       }},
  };
  for (const Case& c : cases) {
    Mutex mu;
    EXPECT_FALSE(c.free_while_held(mu)) << c.name;
    EXPECT_TRUE(FreeElsewhere(mu)) << c.name << " let go";
  }
}

// One value at a time handed from one thread to another: Put waits for an
// empty box, Take for a full one, both on a condition variable that waits on
// the Mutex itself.
class Mailbox {
 public:
  void Put(int v) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    while (full_) cv_.wait(mu_);
    value_ = v;
    full_ = true;
    cv_.notify_all();
  }
  int Take() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    while (!full_) cv_.wait(mu_);
    full_ = false;
    cv_.notify_all();
    return value_;
  }

 private:
  Mutex mu_;
  std::condition_variable_any cv_;
  bool full_ GUARDED_BY(mu_) = false;
  int value_ GUARDED_BY(mu_) = 0;
};

TEST(MutexTest, ConditionVariableAnyWaitsOnIt) {
  Mailbox box;
  std::thread sender([&box] {
    for (int i = 1; i <= 1000; ++i) box.Put(i);
  });
  std::vector<int> got;
  for (int i = 1; i <= 1000; ++i) got.push_back(box.Take());
  sender.join();
  std::vector<int> want;
  for (int i = 1; i <= 1000; ++i) want.push_back(i);
  EXPECT_EQ(got, want);  // each value once, in order: no put overwrote an untaken one
}

}  // namespace
}  // namespace tessera
