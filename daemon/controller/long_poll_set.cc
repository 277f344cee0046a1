#include "daemon/controller/long_poll_set.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace tessera::daemon {

LongPollSet::LongPollSet() : thread_([this] { Run(); }) {}

LongPollSet::~LongPollSet() {
  Shutdown();
  thread_.join();
}

uint64_t LongPollSet::news_count() const {
  MutexLock lock(mu_);
  return news_;
}

void LongPollSet::Park(Steady::duration wait, uint64_t seen_news, std::function<bool()> has_news,
                       std::function<void()> answer) {
  const Steady::time_point deadline = Steady::now() + wait;
  {
    MutexLock lock(mu_);
    if (!stopping_) {
      const bool check = seen_news != news_;
      const bool earliest = std::none_of(polls_.begin(), polls_.end(),
                                         [&](const Poll& p) { return p.deadline <= deadline; });
      polls_.push_back(Poll{deadline, std::move(has_news), std::move(answer), check});
      // A new earliest deadline must wake Run() too: its wait predicate is
      // only true for fresh polls, news or shutdown.
      fresh_ = fresh_ || check || earliest;
      if (check || earliest) cv_.notify_one();
      return;
    }
  }
  answer();
}

void LongPollSet::Notify() {
  {
    MutexLock lock(mu_);
    ++news_;
  }
  cv_.notify_one();
}

void LongPollSet::Shutdown() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
}

size_t LongPollSet::parked() const {
  MutexLock lock(mu_);
  return polls_.size() + checking_;
}

bool LongPollSet::WokenLocked() const { return stopping_ || fresh_ || news_ != handled_; }

void LongPollSet::Run() {
  MutexLock lock(mu_);
  while (true) {
    // Sleep until news, a fresh poll, the earliest deadline, or shutdown.
    if (polls_.empty()) {
      while (!WokenLocked()) cv_.wait(mu_);
    } else {
      Steady::time_point earliest = polls_.front().deadline;
      for (const Poll& p : polls_) earliest = std::min(earliest, p.deadline);
      while (!WokenLocked()) {
        if (cv_.wait_until(mu_, earliest) == std::cv_status::timeout) break;
      }
    }
    if (stopping_) {
      std::list<Poll> all;
      all.swap(polls_);
      lock.Unlock();
      for (Poll& p : all) p.answer();
      lock.Lock();
      if (polls_.empty()) return;  // (Park after Shutdown answers inline)
      continue;
    }

    // Which polls to look at: all on news, else only the fresh ones.
    const bool news = news_ != handled_;
    handled_ = news_;
    fresh_ = false;
    const Steady::time_point now = Steady::now();
    std::list<Poll> due;       // deadline passed: answer
    std::list<Poll> to_check;  // ask has_news
    for (auto it = polls_.begin(); it != polls_.end();) {
      auto next = std::next(it);
      if (it->deadline <= now) {
        due.splice(due.end(), polls_, it);
      } else if (news || it->check) {
        it->check = false;
        to_check.splice(to_check.end(), polls_, it);
      }
      it = next;
    }
    if (due.empty() && to_check.empty()) continue;
    checking_ = to_check.size();  // still parked while looked at
    lock.Unlock();
    for (Poll& p : due) p.answer();
    std::list<Poll> keep;
    for (auto it = to_check.begin(); it != to_check.end();) {
      auto next = std::next(it);
      if (it->has_news()) {
        {
          MutexLock answered(mu_);
          --checking_;
        }
        it->answer();
      } else {
        keep.splice(keep.end(), to_check, it);
      }
      it = next;
    }
    due.clear();
    to_check.clear();
    lock.Lock();
    checking_ = 0;
    polls_.splice(polls_.end(), keep);
  }
}

}  // namespace tessera::daemon
