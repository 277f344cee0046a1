// The agent <-> controller protocol: level-triggered reconciliation.
//
// Every heartbeat (POST /api/v1/agent/heartbeat, authenticated with the join
// token) carries the node's full inventory and *everything* the agent runs or
// has run and not yet been told to forget. Every answer carries *everything*
// the node should run now. The agent starts what is desired and missing,
// stops what runs and is not desired, and never starts the same
// (job, attempt, rank) twice: a worker that exited stays reported as exited
// until the controller stops listing it. A lost message heals on the next
// beat.
//
// Thread safety: plain values.
#ifndef TESSERA_API_AGENT_PROTOCOL_H_
#define TESSERA_API_AGENT_PROTOCOL_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "api/types.h"
#include "common/status.h"

namespace tessera::api {

// Identity of one rank of one attempt of one job.
struct WorkerKey {
  JobId job_id = 0;
  int64_t attempt = 0;
  int64_t rank = 0;
  friend auto operator<=>(const WorkerKey&, const WorkerKey&) = default;
};

enum class WorkerState { kRunning, kExited, kStopping };
std::string_view WorkerStateName(WorkerState state);

inline constexpr size_t kMaxProgressLinesPerWorker = 256;

// Exit code of a rank that stopped because a peer vanished: one of its
// collectives failed (connection closed or reset, or timed out). The
// controller then checks the attempt's other nodes at once instead of
// waiting out the heartbeat timeout (daemon/controller/failure_detector.h).
// tessera-worker exits so; any worker may.
inline constexpr int64_t kPeerLostExitCode = 75;

struct WorkerStatus {
  WorkerKey key;
  int64_t pid = 0;
  WorkerState state = WorkerState::kRunning;
  // For kExited: exit code, or 128+signal when killed by a signal.
  int64_t exit_code = 0;
  // Latest progress line the worker wrote (JSON object), or null.
  Json progress;
  // The progress lines the worker wrote after the newest step an earlier
  // beat delivered, oldest first, at most kMaxProgressLinesPerWorker (the
  // newest), so the controller's metrics history gets every step and not
  // only the newest one at each beat. Empty from agents that predate it.
  std::vector<Json> progress_lines;
  // The last lines of the rank's combined stdout/stderr log (at most 100),
  // so the controller can answer log requests without reaching the node.
  std::vector<std::string> log_tail;
};

struct HeartbeatRequest {
  std::string node;     // unique node name
  std::string address;  // address other nodes reach this one at
  int64_t agent_started_ms = 0;
  std::vector<Device> devices;
  std::vector<DeviceLink> links;  // how the node's devices reach each other
  int64_t cpu_cores = 0;          // logical CPU cores of the machine; 0: unknown
  // The node's link to the other nodes as its inventory declares it
  // ("network_bandwidth_bytes_per_s", "network_latency_s"), and the
  // machine's loopback Gloo link as the agent measured it
  // (agent/gloo_link_benchmark.h; "gloo_bandwidth_bytes_per_s",
  // "gloo_latency_s", "gloo_cpu_per_hop_s"). Bandwidth 0 (or absent): unknown,
  // and the other figures are ignored.
  NodeLink network;
  NodeLink gloo_link;
  std::vector<WorkerStatus> workers;
  // Long poll: the controller may hold the answer up to this long while the
  // node has nothing to change, and answers at once when its desired set
  // changes. 0: answer at once (the agent has news to report next).
  int64_t wait_ms = 0;
  // The sender reads compact answers (ToJson(HeartbeatResponse, true)):
  // every agent built with HeartbeatResponseFromJson does, so it defaults to
  // true; a heartbeat without the field (an older agent) gets full answers.
  bool compact_launches = true;
  // The node's inventory (devices with their busy flags, links, cpu_cores,
  // network link) is what the last answered beat carried: those fields are
  // left empty and the controller keeps what it has. Sent only to a
  // controller whose answer said accepts_unchanged_inventory.
  bool inventory_unchanged = false;
};

// What the node must run. The agent builds the process from these fields:
// argv[0] is an absolute path; env is added to the agent's clean base env.
struct WorkerLaunch {
  WorkerKey key;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // RANK, WORLD_SIZE, MASTER_ADDR, ...
  std::vector<int64_t> device_indices;     // devices of this node the rank uses
  Json plan;                               // written to a file; TESSERA_PLAN points at it
  // The Unix account the worker runs as ("": the agent's own). An agent
  // running as root drops to it before exec; any other agent refuses a
  // launch for an account not its own.
  std::string run_as;
  // The rank's place in its attempt re-formed after a node loss (null: none).
  // {"generation": G (counts up from 1 per attempt), "env": {RANK,
  // WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, ...: the variables
  // that change}, "plan": the new rank plan}. A running worker keeps its key;
  // its agent writes each newer generation to the rank's reform.json
  // (TESSERA_REFORM_FILE), which tessera-worker watches to re-form its
  // process group and train on (worker/runtime/reform.h).
  Json reform;
};

struct HeartbeatResponse {
  std::vector<WorkerLaunch> desired;  // the complete desired set for the node
  int64_t heartbeat_interval_ms = 1000;
  // The controller keeps a node's inventory across beats that say
  // inventory_unchanged (absent from older controllers: send it every beat).
  bool accepts_unchanged_inventory = false;
  // The controller does not know the node's inventory: send it next beat.
  bool send_inventory = false;
};

Json ToJson(const WorkerStatus& w);
Json ToJson(const HeartbeatRequest& r);
Json ToJson(const WorkerLaunch& l);
// compact: each (job, attempt)'s rank plan is sent once, in "plans", and
// its launches name it ("plan_ref") instead of repeating it per rank; only
// for senders whose heartbeat said compact_launches. HeartbeatResponseFromJson
// reads both forms and fills WorkerLaunch::plan either way.
Json ToJson(const HeartbeatResponse& r, bool compact = false);
Result<HeartbeatRequest> HeartbeatRequestFromJson(const Json& j);
Result<HeartbeatResponse> HeartbeatResponseFromJson(const Json& j);

}  // namespace tessera::api

#endif  // TESSERA_API_AGENT_PROTOCOL_H_
