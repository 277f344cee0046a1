// SimAgents: many simulated agents driven from a few threads, for the load
// bench. Every agent is a coroutine on one Boost.Asio io_context with its
// own keep-alive connection (HTTP, or HTTPS verified with tesserad's CA),
// and speaks the agent protocol as tessera-agent does: it enrols with the
// join token (and uses the issued node credential), then long-polls
// heartbeats at the controller's interval with one emulated device, sends
// its inventory only while the controller asks for it, and reports the
// workers it is told to run as running at once (and drops those no longer
// desired).
//
// Measured per beat: the round trip of beats answered at once (wait_ms 0:
// enrolment's first beat and every report of a change), and for long polls
// answered at their deadline without news, how late the answer came
// (round trip minus wait_ms: the controller's handling of the beat plus the
// long-poll set's delay).
//
// Ownership: owns its io_context and threads; Stop() (or the destructor)
// ends every agent and joins the threads.
// Thread safety: Start/Stop from one thread; the getters may be called any
// time (the samples are locked).
#ifndef TESSERA_BENCH_CLUSTER_SIM_AGENTS_H_
#define TESSERA_BENCH_CLUSTER_SIM_AGENTS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace tessera::bench {

struct SimAgentsOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  // Non-empty: HTTPS, the server verified with this CA (PEM) and host.
  std::string ca_file;
  std::string join_token;
  std::string node_prefix = "n";  // nodes are <prefix>0 .. <prefix>N-1
  int agents = 0;
  int threads = 1;  // threads running the io_context
  // The agents' first connections are spread evenly over this time, as
  // agents that did not all start in the same millisecond.
  std::chrono::milliseconds spread{1000};
};

class SimAgents {
 public:
  // REQUIRES: options.agents >= 0, options.threads >= 1, port set.
  explicit SimAgents(SimAgentsOptions options);
  ~SimAgents();  // Stop()
  SimAgents(const SimAgents&) = delete;
  SimAgents& operator=(const SimAgents&) = delete;

  // Starts the agents and the threads. An unreadable CA file is an error.
  Status Start();
  // Ends every agent (requests in flight are dropped) and joins the threads.
  void Stop();

  // Drops the samples taken so far (the measured window starts now).
  void ClearSamples();

  // Round trips (ms) of beats answered at once.
  std::vector<double> ImmediateBeatMs() const;
  // Lateness (ms) of long polls answered at their deadline without news.
  std::vector<double> HeldBeatLateMs() const;
  // Answered beats, and failed calls (transport errors, non-2xx answers).
  int64_t beats() const;
  int64_t failures() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::bench

#endif  // TESSERA_BENCH_CLUSTER_SIM_AGENTS_H_
