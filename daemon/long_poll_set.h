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
#ifndef TESSERA_DAEMON_LONG_POLL_SET_H_
#define TESSERA_DAEMON_LONG_POLL_SET_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

namespace tessera::daemon {

class LongPollSet {
 public:
  using Steady = std::chrono::steady_clock;

  LongPollSet();
  ~LongPollSet();
  LongPollSet(const LongPollSet&) = delete;
  LongPollSet& operator=(const LongPollSet&) = delete;

  // How many times Notify() was called; read it before deciding to park.
  uint64_t news_count() const;

  // Parks a poll for at most `wait`. REQUIRES: answer callable; has_news
  // callable and cheap (called once per Notify while parked).
  void Park(Steady::duration wait, uint64_t seen_news, std::function<bool()> has_news,
            std::function<void()> answer);

  // Something changed: parked polls with news are answered soon.
  void Notify();

  // Answers every parked poll now, and every later one as it is parked.
  void Shutdown();

  // Polls parked right now (those Run() is asking has_news included).
  size_t parked() const;

 private:
  struct Poll {
    Steady::time_point deadline;
    std::function<bool()> has_news;
    std::function<void()> answer;
    bool check = false;  // parked with an old news count: check it once
  };

  void Run();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::list<Poll> polls_;  // guarded by mu_
  uint64_t news_ = 0;      // guarded by mu_
  uint64_t handled_ = 0;   // news_ as of the last full check; guarded by mu_
  size_t checking_ = 0;    // taken out by Run() to ask has_news; guarded by mu_
  bool fresh_ = false;     // some poll has check set; guarded by mu_
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;     // last: starts after the members it uses
};

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_LONG_POLL_SET_H_
