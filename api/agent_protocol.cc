#include "api/agent_protocol.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "api/json_codec.h"
#include "common/enum_names.h"
#include "common/json_fields.h"

namespace tessera::api {
namespace {

// A worker's key, the first members of a WorkerStatus and a WorkerLaunch.
constexpr JsonMember<WorkerKey> kWorkerKeyMembers[] = {
    {"job_id", &WorkerKey::job_id},
    {"attempt", &WorkerKey::attempt},
    {"rank", &WorkerKey::rank},
};

Result<WorkerKey> KeyFromJson(const Json& j) {
  return MembersFromJson(kWorkerKeyMembers, j, "must be an object");
}

Json KeyJson(const WorkerKey& k) { return MembersToJson(kWorkerKeyMembers, k); }

constexpr EnumName<WorkerState> kWorkerStateNames[] = {
    {WorkerState::kRunning, "running"},
    {WorkerState::kExited, "exited"},
    {WorkerState::kStopping, "stopping"},
};
static_assert(IsValidNameTable(kWorkerStateNames));

// The elements of a heartbeat's "workers" and of an answer's "desired" name
// their fields without the list's "key[i]." (ReadJsonList adds it).

Result<WorkerStatus> WorkerStatusFromJson(const Json& w) {
  WorkerStatus s;
  TESSERA_ASSIGN_OR_RETURN(s.key, KeyFromJson(w));
  JsonFields worker(w);
  std::string state = "running";
  TESSERA_RETURN_IF_ERROR(worker.Int("pid", &s.pid));
  TESSERA_RETURN_IF_ERROR(worker.Int("exit_code", &s.exit_code));
  TESSERA_RETURN_IF_ERROR(worker.String("state", &state));
  // "must be running, exited or stopping" otherwise.
  TESSERA_ASSIGN_OR_RETURN(s.state, ParseNameOrError(kWorkerStateNames, state, "state"));
  if (auto p = w.find("progress"); p != w.end()) s.progress = *p;
  if (auto p = w.find("progress_lines"); p != w.end() && !p->is_null()) {
    if (!p->is_array()) return InvalidArgument("must be an array", "progress_lines");
    if (p->size() > kMaxProgressLinesPerWorker) {
      return InvalidArgument(
          "must hold at most " + std::to_string(kMaxProgressLinesPerWorker) + " lines",
          "progress_lines");
    }
    for (const auto& line : *p) {
      if (!line.is_object()) return InvalidArgument("must hold JSON objects", "progress_lines");
      s.progress_lines.push_back(line);
    }
  }
  if (auto t = w.find("log_tail"); t != w.end() && !t->is_null()) {
    if (!t->is_array()) return InvalidArgument("must be an array", "log_tail");
    for (const auto& line : *t) {
      if (!line.is_string()) return InvalidArgument("must hold strings", "log_tail");
      s.log_tail.push_back(line.get<std::string>());
    }
  }
  return s;
}

// `answer`: the whole heartbeat answer, whose "plans" a "plan_ref" names.
Result<WorkerLaunch> WorkerLaunchFromJson(const Json& l, const Json& answer) {
  WorkerLaunch w;
  TESSERA_ASSIGN_OR_RETURN(w.key, KeyFromJson(l));
  JsonFields launch(l);
  TESSERA_RETURN_IF_ERROR(launch.StringList("argv", &w.argv));
  TESSERA_RETURN_IF_ERROR(launch.StringMap("env", &w.env));
  TESSERA_RETURN_IF_ERROR(launch.IntList("device_indices", &w.device_indices));
  TESSERA_RETURN_IF_ERROR(launch.String("run_as", &w.run_as));
  if (w.argv.empty()) return InvalidArgument("must not be empty", "argv");
  if (auto p = l.find("plan"); p != l.end()) w.plan = *p;
  if (auto p = l.find("reform"); p != l.end() && !p->is_null()) {
    if (!p->is_object() || !p->contains("generation") || !(*p)["generation"].is_number_integer()) {
      return InvalidArgument("must be an object with an integer generation", "reform");
    }
    w.reform = *p;
  }
  if (auto ref = l.find("plan_ref"); ref != l.end()) {
    auto plans = answer.find("plans");
    const Json* plan = nullptr;
    if (ref->is_string() && plans != answer.end() && plans->is_object()) {
      auto found = plans->find(ref->get<std::string>());
      if (found != plans->end()) plan = &*found;
    }
    if (plan == nullptr) return InvalidArgument("names no plan of \"plans\"", "plan_ref");
    w.plan = *plan;
  }
  return w;
}

// A link the beat may carry: "<prefix>_bandwidth_bytes_per_s" (> 0; 0 or
// absent: unknown, and the rest is ignored), "<prefix>_latency_s" (>= 0) and,
// `with_cpu`, "<prefix>_cpu_per_hop_s" (>= 0).
Status ReadLink(JsonFields& fields, const std::string& prefix, bool with_cpu, NodeLink* link) {
  const std::string bw_name = prefix + "_bandwidth_bytes_per_s";
  TESSERA_RETURN_IF_ERROR(fields.Double(bw_name, &link->bandwidth_bytes_per_s));
  if (!(link->bandwidth_bytes_per_s >= 0) || !std::isfinite(link->bandwidth_bytes_per_s)) {
    return InvalidArgument("must be a number > 0 (0: unknown)", bw_name);
  }
  std::vector<std::pair<std::string, double*>> rest = {{prefix + "_latency_s", &link->latency_s}};
  if (with_cpu) rest.push_back({prefix + "_cpu_per_hop_s", &link->cpu_per_hop_s});
  for (const auto& [name, value] : rest) {
    TESSERA_RETURN_IF_ERROR(fields.Double(name, value));
    if (!(*value >= 0) || !std::isfinite(*value))
      return InvalidArgument("must be a number >= 0", name);
  }
  if (!link->known()) *link = NodeLink{};  // no link known
  return Status::Ok();
}

// A known link's fields into the beat (ReadLink's names).
void WriteLink(const NodeLink& link, const std::string& prefix, bool with_cpu, Json* j) {
  if (!link.known()) return;
  (*j)[prefix + "_bandwidth_bytes_per_s"] = link.bandwidth_bytes_per_s;
  (*j)[prefix + "_latency_s"] = link.latency_s;
  if (with_cpu) (*j)[prefix + "_cpu_per_hop_s"] = link.cpu_per_hop_s;
}

}  // namespace

std::string_view WorkerStateName(WorkerState state) { return NameOf(kWorkerStateNames, state); }

Json ToJson(const WorkerStatus& w) {
  Json j = KeyJson(w.key);
  j["pid"] = w.pid;
  j["state"] = WorkerStateName(w.state);
  j["exit_code"] = w.exit_code;
  j["progress"] = w.progress;
  if (!w.progress_lines.empty()) j["progress_lines"] = w.progress_lines;
  j["log_tail"] = w.log_tail;
  return j;
}

Json ToJson(const HeartbeatRequest& r) {
  Json j{{"node", r.node},
         {"address", r.address},
         {"agent_started_ms", r.agent_started_ms},
         {"devices", ToJsonArray(r.devices)},
         {"links", ToJsonArray(r.links)},
         {"workers", ToJsonArray(r.workers)},
         {"wait_ms", r.wait_ms},
         {"cpu_cores", r.cpu_cores}};
  if (r.compact_launches) j["compact_launches"] = true;
  if (r.inventory_unchanged) j["inventory_unchanged"] = true;
  WriteLink(r.network, "network", /*with_cpu=*/false, &j);
  WriteLink(r.gloo_link, "gloo", /*with_cpu=*/true, &j);
  return j;
}

Json ToJson(const WorkerLaunch& l) {
  Json j = KeyJson(l.key);
  j["argv"] = l.argv;
  j["env"] = l.env;
  j["device_indices"] = l.device_indices;
  j["plan"] = l.plan;
  if (!l.run_as.empty()) j["run_as"] = l.run_as;
  if (!l.reform.is_null()) j["reform"] = l.reform;
  return j;
}

Json ToJson(const HeartbeatResponse& r, bool compact) {
  Json desired = Json::array();
  Json plans = Json::object();
  for (const auto& l : r.desired) {
    if (!compact) {
      desired.push_back(ToJson(l));
      continue;
    }
    // The ranks of one attempt share one plan; another one gets its own key.
    std::string ref = std::to_string(l.key.job_id) + "/" + std::to_string(l.key.attempt);
    if (auto it = plans.find(ref); it != plans.end() && *it != l.plan) {
      ref += "/" + std::to_string(l.key.rank);
    }
    if (!plans.contains(ref)) plans[ref] = l.plan;
    Json j = ToJson(l);
    j.erase("plan");
    j["plan_ref"] = ref;
    desired.push_back(std::move(j));
  }
  Json out{{"desired", desired}, {"heartbeat_interval_ms", r.heartbeat_interval_ms}};
  if (compact) out["plans"] = std::move(plans);
  if (r.accepts_unchanged_inventory) out["accepts_unchanged_inventory"] = true;
  if (r.send_inventory) out["send_inventory"] = true;
  return out;
}

Result<HeartbeatRequest> HeartbeatRequestFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("heartbeat must be a JSON object");
  HeartbeatRequest r;
  JsonFields fields(j);
  TESSERA_RETURN_IF_ERROR(fields.String("node", &r.node));
  TESSERA_RETURN_IF_ERROR(fields.String("address", &r.address));
  TESSERA_RETURN_IF_ERROR(fields.Int("agent_started_ms", &r.agent_started_ms));
  TESSERA_ASSIGN_OR_RETURN(const Json* devices, fields.Array("devices"));
  TESSERA_ASSIGN_OR_RETURN(const Json* links, fields.Array("links"));
  TESSERA_ASSIGN_OR_RETURN(const Json* workers, fields.Array("workers"));
  TESSERA_RETURN_IF_ERROR(fields.Int("wait_ms", &r.wait_ms));
  TESSERA_RETURN_IF_ERROR(fields.Int("cpu_cores", &r.cpu_cores));
  if (r.wait_ms < 0 || r.wait_ms > 60'000) {
    return InvalidArgument("must be between 0 and 60000", "wait_ms");
  }
  r.compact_launches = false;  // absent: an agent from before compact answers
  TESSERA_RETURN_IF_ERROR(fields.Bool("compact_launches", &r.compact_launches));
  TESSERA_RETURN_IF_ERROR(fields.Bool("inventory_unchanged", &r.inventory_unchanged));
  if (r.cpu_cores < 0 || r.cpu_cores > 65'536) {
    return InvalidArgument("must be between 0 and 65536", "cpu_cores");
  }
  TESSERA_RETURN_IF_ERROR(ReadLink(fields, "network", /*with_cpu=*/false, &r.network));
  TESSERA_RETURN_IF_ERROR(ReadLink(fields, "gloo", /*with_cpu=*/true, &r.gloo_link));
  if (r.node.empty()) return InvalidArgument("must name the node", "node");
  TESSERA_RETURN_IF_ERROR(ReadJsonList(devices, "devices", &DeviceFromJson, &r.devices));
  TESSERA_RETURN_IF_ERROR(ReadJsonList(links, "links", &DeviceLinkFromJson, &r.links));
  TESSERA_RETURN_IF_ERROR(ReadJsonList(workers, "workers", &WorkerStatusFromJson, &r.workers));
  return r;
}

Result<HeartbeatResponse> HeartbeatResponseFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("heartbeat answer must be a JSON object");
  HeartbeatResponse r;
  r.heartbeat_interval_ms = 1000;
  JsonFields fields(j);
  TESSERA_ASSIGN_OR_RETURN(const Json* desired, fields.Array("desired"));
  TESSERA_RETURN_IF_ERROR(fields.Int("heartbeat_interval_ms", &r.heartbeat_interval_ms));
  TESSERA_RETURN_IF_ERROR(
      fields.Bool("accepts_unchanged_inventory", &r.accepts_unchanged_inventory));
  TESSERA_RETURN_IF_ERROR(fields.Bool("send_inventory", &r.send_inventory));
  TESSERA_RETURN_IF_ERROR(ReadJsonList(
      desired, "desired", [&j](const Json& l) { return WorkerLaunchFromJson(l, j); }, &r.desired));
  return r;
}

}  // namespace tessera::api
