// Agent: the heartbeat loop of tessera-agent.
//
// Every beat (default 1 s; the controller's answer may change it):
//   1. refresh the inventory's live figures (utilization, memory used),
//   2. snapshot the supervisor (state, exit code, progress, log tail),
//   3. send the heartbeat through the AgentTransport,
//   4. reconcile the answer's desired set against that snapshot
//      (agent/reconciler.h): start, stop, forget.
// A lost message changes nothing: the agent keeps its workers and tries
// again on the next beat (level-triggered protocol, api/agent_protocol.h).
//
// Construction and use (see agent/main.cc):
//   inventory_options.benchmark = [](const std::string& d) { return RunDeviceBenchmark(d); };
//   SystemInventoryProvider inventory(inventory_options);
//   ProcessSupervisor supervisor(supervisor_options);
//   supervisor.Recover();                       // re-adopt previous workers
//   auto transport = HttpAgentTransport::Create(url, token);
//   SystemdNotifier notifier;
//   Agent agent(agent_options, transport->get(), &inventory, &supervisor, &notifier);
//   TESSERA_RETURN_IF_ERROR(agent.Init());      // bad inventory: refuse to start
//   agent.Run();                                // until RequestStop()
//
// On stop the agent stops sending; by default it leaves workers running so
// the next agent re-adopts them (stop_workers_on_exit stops them instead).
// Thread safety: Run/Init/Beat on one thread; RequestStop and RequestReload
// from any thread (e.g. a signal-handling thread).
#ifndef TESSERA_AGENT_AGENT_H_
#define TESSERA_AGENT_AGENT_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <string>
#include <vector>

#include "agent/inventory.h"
#include "agent/service_notifier.h"
#include "agent/supervisor.h"
#include "agent/transport.h"
#include "api/agent_protocol.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"

namespace tessera::agent {

struct AgentOptions {
  std::string node;                                    // REQUIRES: non-empty, unique in the cluster
  std::string address = "127.0.0.1";                   // where other nodes reach this one
  std::chrono::milliseconds heartbeat_interval{1000};  // until the controller says otherwise
  // WATCHDOG=1 ping period (SystemdNotifier::WatchdogPingInterval()); 0: none.
  std::chrono::microseconds watchdog_interval{0};
  bool stop_workers_on_exit = false;
  // The longest a beat asks tesserad to hold its answer while a worker runs
  // here. A worker's news that the agent reads only at a beat (a rank whose
  // peer vanished, waiting to re-form) waits for the held beat to return, so
  // a node that runs workers keeps this short; an idle node's beat is held
  // for up to an interval (3 s at most).
  std::chrono::milliseconds busy_hold{250};
};

class Agent {
 public:
  // Pointers are not owned and must outlive the Agent. notifier may be null.
  Agent(AgentOptions options, AgentTransport* transport, InventoryProvider* inventory,
        Supervisor* supervisor, ServiceNotifier* notifier = nullptr,
        Clock* clock = SystemClock::Default());

  // Loads the inventory. An error (e.g. a bad inventory file) means the agent
  // must not start.
  Status Init();

  // One heartbeat and reconcile. Returns the transport's or the answer's
  // error when the beat was lost (nothing was changed then).
  // Long poll: a beat after which nothing changed asks the controller to
  // hold its answer up to one interval (wait_ms; busy_hold while a worker
  // runs here), so new work arrives at once; a beat that started, stopped or
  // saw a worker end is followed at once by a beat with wait_ms = 0 that
  // reports it.
  // REQUIRES: Init() succeeded.
  Status Beat();

  // Whether the loop should beat again without waiting (see Beat), and the
  // wait_ms the next beat asks for.
  bool beat_again_now() const { return beat_again_now_; }
  int64_t next_wait_ms() const { return next_wait_ms_; }

  // Beats until RequestStop(); reloads the inventory after RequestReload().
  // On return: STOPPING=1 sent, workers stopped if stop_workers_on_exit.
  void Run() EXCLUDES(mu_);

  void RequestStop() EXCLUDES(mu_);
  void RequestReload() EXCLUDES(mu_);  // SIGHUP: re-read the inventory file

  // Loop-thread accessors (tests, logs).
  const NodeInventory& inventory() const { return inventory_; }
  std::chrono::milliseconds heartbeat_interval() const { return interval_; }
  int64_t successful_beats() const { return successful_beats_; }

 private:
  void Reload();

  const AgentOptions options_;
  AgentTransport* transport_;
  InventoryProvider* inventory_provider_;
  Supervisor* supervisor_;
  ServiceNotifier* notifier_;
  Clock* clock_;
  const int64_t started_ms_;

  NodeInventory inventory_;
  std::chrono::milliseconds interval_;
  int64_t successful_beats_ = 0;
  int64_t failed_beats_in_row_ = 0;
  int64_t next_wait_ms_ = 0;  // the first beat reports at once
  bool beat_again_now_ = false;
  // State of every worker as last reported, to notice changes.
  std::map<api::WorkerKey, api::WorkerState> reported_;
  // The newest re-form generation handed to each worker.
  std::map<api::WorkerKey, int64_t> reform_handed_;
  // The inventory part of the last answered beat that carried it, and
  // whether the controller keeps it across beats that say it is unchanged.
  std::string sent_inventory_;
  bool controller_keeps_inventory_ = false;
  // Device indices of every launch the controller asked for, for `busy`.
  std::map<api::WorkerKey, std::vector<int64_t>> devices_of_;
  // The newest progress step a beat that got an answer carried, per worker:
  // later beats send only the lines after it.
  std::map<api::WorkerKey, int64_t> delivered_step_;

  Mutex mu_;
  std::condition_variable_any cv_;
  bool stop_requested_ GUARDED_BY(mu_) = false;
  bool reload_requested_ GUARDED_BY(mu_) = false;
};

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_AGENT_H_
