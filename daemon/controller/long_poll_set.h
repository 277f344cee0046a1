// LongPollSet: long polls parked until there is news or their wait ends,
// answered by one thread, so no thread waits per poll.
//
// A poll is parked with a deadline and two callbacks: has_news (does the
// poller's answer differ from what it already has?) and answer (sends the
// answer; called exactly once). Notify() says "something changed": the
// set's thread then asks every parked poll's has_news and answers those
// with news. A poll is answered at its deadline in any case, and at once
// after Shutdown().
//
// News that happens between the poller computing "nothing new" and Park()
// is not lost: Park takes the news count read (news_count()) before the
// poller looked, and a poll parked with an older count is checked at once.
//
// A poll waits real time (the set's own steady clock, whatever clock the
// caller's logic uses): the caller gives how long, not until when.
//
// Thread safety: every method may be called from any thread. Callbacks run
// on the set's own thread (or on the caller's, for Park after Shutdown)
// without the set's lock held; they may call news_count() and Notify() but
// not Park(). The destructor answers what is left and joins the thread.
#ifndef TESSERA_DAEMON_CONTROLLER_LONG_POLL_SET_H_
#define TESSERA_DAEMON_CONTROLLER_LONG_POLL_SET_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <thread>

#include "common/mutex.h"
#include "common/thread_annotations.h"

namespace tessera::daemon {

class LongPollSet {
 public:
  using Steady = std::chrono::steady_clock;

  LongPollSet();
  ~LongPollSet();
  LongPollSet(const LongPollSet&) = delete;
  LongPollSet& operator=(const LongPollSet&) = delete;

  // How many times Notify() was called; read it before deciding to park.
  uint64_t news_count() const EXCLUDES(mu_);

  // Parks a poll for at most `wait`. REQUIRES: answer callable; has_news
  // callable and cheap (called once per Notify while parked).
  void Park(Steady::duration wait, uint64_t seen_news, std::function<bool()> has_news,
            std::function<void()> answer) EXCLUDES(mu_);

  // Something changed: parked polls with news are answered soon.
  void Notify() EXCLUDES(mu_);

  // Answers every parked poll now, and every later one as it is parked.
  void Shutdown() EXCLUDES(mu_);

  // Polls parked right now (those Run() is asking has_news included).
  size_t parked() const EXCLUDES(mu_);

 private:
  struct Poll {
    Steady::time_point deadline;
    std::function<bool()> has_news;
    std::function<void()> answer;
    bool check = false;  // parked with an old news count: check it once
  };

  void Run() EXCLUDES(mu_);
  // Whether Run() has something to do before the earliest deadline.
  bool WokenLocked() const REQUIRES(mu_);

  mutable Mutex mu_;
  std::condition_variable_any cv_;
  std::list<Poll> polls_ GUARDED_BY(mu_);
  uint64_t news_ GUARDED_BY(mu_) = 0;
  uint64_t handled_ GUARDED_BY(mu_) = 0;  // news_ as of the last full check
  size_t checking_ GUARDED_BY(mu_) = 0;   // taken out by Run() to ask has_news
  bool fresh_ GUARDED_BY(mu_) = false;    // some poll has check set
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts after the members it uses
};

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_CONTROLLER_LONG_POLL_SET_H_
