// Mutex and MutexLock: a std::mutex whose lock rules Clang checks.
//
// Mutex wraps std::mutex and is annotated as a capability
// (common/thread_annotations.h), so members declared GUARDED_BY(mu_) and
// functions declared REQUIRES(mu_) are checked by -Wthread-safety wherever
// the mutex is taken through Lock/Unlock or a MutexLock. std::mutex itself
// carries no annotations, so the analysis cannot follow it.
//
//   Mutex mu_;
//   int count_ GUARDED_BY(mu_) = 0;
//   void Add() EXCLUDES(mu_) {
//     MutexLock lock(mu_);
//     ++count_;
//   }
//
// Condition variables: std::condition_variable_any waits on a Mutex directly
// (it has lock/unlock), e.g. `while (!ready_) cv_.wait(mu_);` inside a
// MutexLock's scope. Write the loop rather than pass a predicate: a lambda
// is analysed as a function of its own, which does not hold the lock.
//
// std::unique_lock<Mutex> and std::scoped_lock also work (lowercase
// lock/unlock/try_lock), but the analysis does not see what they hold;
// prefer MutexLock.
//
// Ownership: a Mutex is neither copied nor moved; a MutexLock borrows its
// Mutex, which must outlive it.
// Thread safety: a Mutex is what makes other data safe to share; a
// MutexLock belongs to the thread that made it.
#ifndef TESSERA_COMMON_MUTEX_H_
#define TESSERA_COMMON_MUTEX_H_

#include <mutex>

#include "common/thread_annotations.h"

namespace tessera {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  // Blocks until this thread holds the mutex. REQUIRES: not held by it.
  void Lock() ACQUIRE() { mu_.lock(); }
  // REQUIRES: held by this thread.
  void Unlock() RELEASE() { mu_.unlock(); }
  // Takes the mutex if it is free; true when it did.
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }

  // Tells the analysis that the caller holds the mutex where it cannot see
  // it (no run-time check). REQUIRES: held by this thread.
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

  // The standard Lockable names, so std::condition_variable_any and the
  // standard lock types accept a Mutex.
  void lock() ACQUIRE() { Lock(); }
  void unlock() RELEASE() { Unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return TryLock(); }

 private:
  std::mutex mu_;
};

// Holds a Mutex from construction to destruction (std::lock_guard for
// Mutex). Unlock() and Lock() let go of it and take it again inside the
// scope, e.g. around a callback that must run without it.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_.Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // REQUIRES: held through this lock.
  void Unlock() RELEASE() {
    held_ = false;
    mu_.Unlock();
  }
  // REQUIRES: let go of through Unlock().
  void Lock() ACQUIRE() {
    mu_.Lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

}  // namespace tessera

#endif  // TESSERA_COMMON_MUTEX_H_
