// Request/response types of the Tessera REST API v1 and their JSON.
//
// These plain structs are shared by tesserad, tessera-agent, the CLI and (as
// JSON) the web UI. ToJson/FromJson here are *shape* conversions: FromJson
// reports a wrong JSON type with the field's name but does not check ranges
// or allow-lists; ValidateJobSpec (api/job_spec_validation.h) does that.
//
// Thread safety: plain values.
#ifndef TESSERA_API_TYPES_H_
#define TESSERA_API_TYPES_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/image_convention.h"
#include "common/status.h"

namespace tessera::api {

using Json = nlohmann::json;
using JobId = int64_t;

enum class JobKind { kTrain, kInfer };
std::string_view JobKindName(JobKind kind);
std::optional<JobKind> ParseJobKind(std::string_view name);

// Life cycle of a job; the allowed transitions live in
// daemon/controller/job_state_machine.h.
enum class JobState {
  kPending,     // accepted and durable, waiting for devices
  kPlanned,     // a plan was chosen, ranks not yet launched
  kStarting,    // ranks being launched (gang start)
  kRunning,     // every rank of the current attempt runs
  kRecovering,  // an attempt ended abnormally; waiting to re-plan
  kSucceeded,
  kFailed,
  kCancelled,
};
std::string_view JobStateName(JobState state);
std::optional<JobState> ParseJobState(std::string_view name);
bool IsTerminal(JobState state);

enum class Role { kUser, kAdmin };
std::string_view RoleName(Role role);
std::optional<Role> ParseRole(std::string_view name);

// What a user submits. See docs/rest-api.md for every field.
struct JobSpec {
  std::string name;
  JobKind kind = JobKind::kTrain;
  std::string entrypoint;         // "builtin:<model>", "cmd:<name>" or "model:<name>"
  std::vector<std::string> args;  // extra arguments passed to the entrypoint
  std::string dataset;            // input folder or list file
  std::string output;             // infer: output folder
  std::string checkpoint;         // infer: checkpoint to load
  // infer: size of the largest scans (0: the model's nominal size); lets the
  // planner choose tiled inference for images too large for one device.
  int64_t image_width = 0;
  int64_t image_height = 0;
  int64_t global_batch = 0;
  int64_t steps = 0;
  int64_t checkpoint_every_s = 300;
  std::string layout = "auto";  // auto | data | pipeline | hybrid | tiled
  int64_t priority = 0;
  int64_t max_attempts = 3;
  int64_t min_devices = 1;
  int64_t max_devices = 0;  // 0: no upper limit
  // Whether tesserad may resize the running job to share the lab: shrink a
  // train job for a waiting one or grow it onto free devices (re-forming it
  // in place), grow an infer job onto free devices (new ranks); false: it
  // keeps the devices it started on until it ends or a node is lost.
  bool elastic = true;
  std::map<std::string, std::string> env;
  // infer of a model: entrypoint: how the exported module takes and gives
  // images (api/image_convention.h); unset members come from the module.
  ImageConvention image;

  friend bool operator==(const JobSpec&, const JobSpec&) = default;
};

struct Job {
  JobId id = 0;
  std::string owner;
  JobSpec spec;
  JobState state = JobState::kPending;
  int64_t attempt = 0;     // number of attempts started so far
  int64_t created_ms = 0;  // Unix millis
  int64_t updated_ms = 0;
  std::string reason;  // why the job is in its state (last event)
  Json plan;           // the chosen plan, or null
  Json progress;       // latest progress summary, or null
  Json inference;      // infer jobs: api::InferenceProgress as JSON, or null
};

// One recorded state change of a job (append-only).
struct Event {
  int64_t id = 0;
  JobId job_id = 0;
  int64_t ts_ms = 0;
  std::string from_state;  // empty for the submission event
  std::string to_state;
  int64_t attempt = 0;
  std::string reason;
};

// One waiting job as the queue orders it (GET /api/v1/queue): priority, then
// its user's weighted device share, then submission (scheduler/queue_order.h).
struct QueueRow {
  int64_t position = 0;  // 1-based among the jobs that may start next; 0: held by a user limit
  JobId id = 0;          // 0: another user's job (hidden from non-admins)
  std::string user;
  int64_t priority = 0;
  double user_share = 0;  // the user's devices held / weight when the job was ranked
  std::string reason;     // why it still waits; "" for another user's job
  friend bool operator==(const QueueRow&, const QueueRow&) = default;
};

struct Device {
  std::string node;
  int64_t index = 0;  // index on its node
  std::string name;   // e.g. "NVIDIA A100-SXM4-80GB" or "cpu"
  std::string uuid;
  std::string type;  // "cuda" | "cpu"
  int64_t memory_bytes = 0;
  int64_t memory_used_bytes = 0;
  double utilization = 0.0;           // 0..1
  double measured_tflops = 0.0;       // sustained fp32 matmul throughput measured by the agent
  double measured_tflops_half = 0.0;  // the same at fp16/bf16 (the faster); 0: not measured
  double mem_bandwidth_gbps = 0.0;
  double relative_speed = 1.0;  // emulated devices: declared speed factor
  std::string compute_capability;
  int64_t sm_count = 0;
  bool emulated = false;
  bool busy = false;
  // Why the agent could not measure this device ("" when measured or not asked):
  // its figures are then 0 and the planner excludes it with this reason.
  std::string measure_error;
  // Builtin models' layer profiles measured on this device by its agent
  // (`tessera-worker profile --model M ... --device cuda:K`, the JSON it prints),
  // keyed by model name; the planner uses their times for this device's type.
  // JSON "profiles" (absent when empty): at most kMaxDeviceProfiles objects of at
  // most kMaxDeviceProfileBytes each.
  std::map<std::string, Json> profiles;
  // Why a builtin model could not be profiled on this device ("" when all were or
  // none was asked): the planner estimates its times from the benchmark instead.
  std::string profile_error;
};
inline constexpr size_t kMaxDeviceProfiles = 16;
inline constexpr size_t kMaxDeviceProfileBytes = 256 * 1024;

// How two devices of one node reach each other, as the agent discovered it
// (NVML): "nvlink" (nvlink_count active links), "pcie" (one CPU socket),
// "system" (across sockets) or "unknown".
struct DeviceLink {
  int64_t a = 0;  // device indices on the node, a < b
  int64_t b = 0;
  std::string kind = "unknown";
  int64_t nvlink_count = 0;
  std::string topology;  // NVML topology level, e.g. "hostbridge"; may be empty
  friend bool operator==(const DeviceLink&, const DeviceLink&) = default;
};

// A node's link as its agent reports it: to the other nodes (Node::network,
// declared in its inventory file) or its machine's loopback Gloo link, which
// emulated and CPU devices' ranks talk over (Node::gloo_link, measured:
// agent/gloo_link_benchmark.h). Bandwidth 0: unknown (JSON null; the
// planner assumes its default link), and the other figures are 0 then too.
struct NodeLink {
  double bandwidth_bytes_per_s = 0;  // > 0 when known
  double latency_s = 0;              // one way, >= 0
  double cpu_per_hop_s = 0;          // the Gloo link's: a rank's CPU seconds per hop of a small
                                     // collective, >= 0
  bool known() const { return bandwidth_bytes_per_s > 0; }
  friend bool operator==(const NodeLink&, const NodeLink&) = default;
};

struct Node {
  std::string name;
  std::string address;
  std::string health = "healthy";  // healthy | suspect | dead
  int64_t last_heartbeat_ms = 0;
  std::vector<Device> devices;
  std::vector<DeviceLink> links;  // device pairs with a known link
  int64_t cpu_cores = 0;          // logical CPU cores of the node's machine; 0: unknown
  NodeLink network;               // to the other nodes (cpu_per_hop_s 0)
  NodeLink gloo_link;             // the machine's loopback Gloo link
  // Who runs the node's ranks: "agent" (tessera-agent) or "slurm" (a Slurm
  // partition tesserad submits to; slurm/slurm_pool.h).
  std::string source = "agent";
};

struct Principal {
  std::string user;
  Role role = Role::kUser;
  bool is_admin() const { return role == Role::kAdmin; }
};

struct JobQuery {
  std::optional<JobState> state;
  std::optional<std::string> owner;  // admins may list others; users only self
  int64_t limit = 50;                // 1..500
  JobId after = 0;                   // cursor: jobs with id > after
};

struct JobPage {
  std::vector<Job> jobs;
  std::optional<JobId> next_after;  // set when more jobs may follow
};

// One progress line of one rank of one attempt of a job, as its metrics
// history keeps it (GET /api/v1/jobs/{id}/metrics; daemon/README.md says how
// the history is thinned). Figures the worker did not write are absent.
struct MetricPoint {
  int64_t step = 0;     // >= 0
  int64_t attempt = 0;  // the attempt whose rank wrote it (a change marks a recovery)
  int64_t rank = 0;
  int64_t ts_ms = 0;                    // when the worker wrote it (else when tesserad received it)
  std::optional<double> loss;           // global mean loss
  std::optional<double> samples_per_s;  // global throughput
  std::optional<double> compute_s;      // this rank's step time: busy computing
  std::optional<double> comm_s;         // waiting for all-reduce, sends, the step-end vote
  std::optional<double> bubble_s;       // waiting for a neighbour pipeline stage
  std::optional<int64_t> peak_memory_bytes;            // counted peak on the rank's device
  std::optional<int64_t> predicted_peak_memory_bytes;  // the planner's prediction
  friend bool operator==(const MetricPoint&, const MetricPoint&) = default;
};

inline constexpr int64_t kMaxMetricsPageSize = 5000;

struct MetricsQuery {
  JobId job_id = 0;
  std::optional<int64_t> rank;     // only this rank; every rank when unset
  std::optional<int64_t> attempt;  // only this attempt; every attempt when unset
  std::optional<int64_t> since;    // only steps > since; from the first step when unset
  int64_t limit = 1000;            // 1..kMaxMetricsPageSize
};

// Points by step, then attempt, then rank. A page never splits a step: it
// may hold more than `limit` points when one step alone has more.
struct MetricsPage {
  JobId job_id = 0;
  std::vector<MetricPoint> points;
  std::optional<int64_t> next_since;  // set when more may follow: ask again with since = it
};

// An entrypoint an admin allowed: "builtin:colorize-unet", or a registered
// "cmd:<name>" (an executable) or "model:<name>" (an exported model file).
struct Entrypoint {
  std::string name;
  std::string command;  // absolute path for cmd: and model:, empty for builtin:
  std::string description;
};

// ---- JSON ----
Json ToJson(const JobSpec& spec);
Json ToJson(const Job& job);
Json ToJson(const Event& event);
Json ToJson(const QueueRow& row);
Json ToJson(const Device& device);
Json ToJson(const Node& node);
Json ToJson(const Entrypoint& entrypoint);
Json ToJson(const JobPage& page);
Json ToJson(const MetricPoint& point);  // absent figures are left out
Json ToJson(const MetricsPage& page);

// Shape-only parsing: unknown fields and wrong JSON types are errors that
// name the field; absent fields keep their defaults.
Result<JobSpec> JobSpecFromJson(const Json& j);
Result<Job> JobFromJson(const Json& j);
Result<Event> EventFromJson(const Json& j);
Result<Device> DeviceFromJson(const Json& j);
Json ToJson(const DeviceLink& l);
Result<DeviceLink> DeviceLinkFromJson(const Json& j);
Result<Node> NodeFromJson(const Json& j);
Result<MetricPoint> MetricPointFromJson(const Json& j);
Result<MetricsPage> MetricsPageFromJson(const Json& j);

// A worker's progress line (worker/runtime/README.md) as a history point of
// (attempt, rank): its "step" (required, an integer >= 0), "ts_ms" (else
// received_ms) and the figures above when they are numbers; other fields
// are ignored. nullopt when the line has no usable step.
std::optional<MetricPoint> MetricPointFromProgressLine(const Json& line, int64_t attempt,
                                                       int64_t rank, int64_t received_ms);

}  // namespace tessera::api

#endif  // TESSERA_API_TYPES_H_
