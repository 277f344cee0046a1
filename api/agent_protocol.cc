#include "api/agent_protocol.h"

#include <cmath>

namespace tessera::api {
namespace {

Status Field(const Json& j, const char* key, Json::value_t want, const char* what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  // number_float: any number; number_integer: signed or unsigned integers.
  bool good = it->type() == want ||
              (want == Json::value_t::number_integer && it->is_number_unsigned()) ||
              (want == Json::value_t::number_float && it->is_number());
  if (!good) return InvalidArgument(std::string("must be ") + what, key);
  return Status::Ok();
}

template <typename T>
T Get(const Json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return it->get<T>();
}

Status Nested(const Status& s, const std::string& prefix) {
  if (s.ok()) return s;
  return Status(s.code(), s.message(), prefix + (s.field().empty() ? "" : ".") + s.field());
}

Result<WorkerKey> KeyFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("must be an object");
  for (const char* k : {"job_id", "attempt", "rank"}) {
    TESSERA_RETURN_IF_ERROR(Field(j, k, Json::value_t::number_integer, "an integer"));
  }
  return WorkerKey{Get<int64_t>(j, "job_id", 0), Get<int64_t>(j, "attempt", 0),
                   Get<int64_t>(j, "rank", 0)};
}

Json KeyJson(const WorkerKey& k) {
  return Json{{"job_id", k.job_id}, {"attempt", k.attempt}, {"rank", k.rank}};
}

}  // namespace

std::string_view WorkerStateName(WorkerState state) {
  switch (state) {
    case WorkerState::kRunning:
      return "running";
    case WorkerState::kExited:
      return "exited";
    case WorkerState::kStopping:
      return "stopping";
  }
  return "unknown";
}

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
  Json devices = Json::array();
  for (const auto& d : r.devices) devices.push_back(ToJson(d));
  Json links = Json::array();
  for (const auto& l : r.links) links.push_back(ToJson(l));
  Json workers = Json::array();
  for (const auto& w : r.workers) workers.push_back(ToJson(w));
  Json j{
      {"node", r.node},       {"address", r.address},    {"agent_started_ms", r.agent_started_ms},
      {"devices", devices},   {"links", links},          {"workers", workers},
      {"wait_ms", r.wait_ms}, {"cpu_cores", r.cpu_cores}};
  if (r.compact_launches) j["compact_launches"] = true;
  if (r.inventory_unchanged) j["inventory_unchanged"] = true;
  if (r.network_bandwidth_bytes_per_s > 0) {
    j["network_bandwidth_bytes_per_s"] = r.network_bandwidth_bytes_per_s;
    j["network_latency_s"] = r.network_latency_s;
  }
  return j;
}

Json ToJson(const WorkerLaunch& l) {
  Json j = KeyJson(l.key);
  j["argv"] = l.argv;
  j["env"] = l.env;
  j["device_indices"] = l.device_indices;
  j["plan"] = l.plan;
  if (!l.run_as.empty()) j["run_as"] = l.run_as;
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
  TESSERA_RETURN_IF_ERROR(Field(j, "node", Json::value_t::string, "a string"));
  TESSERA_RETURN_IF_ERROR(Field(j, "address", Json::value_t::string, "a string"));
  TESSERA_RETURN_IF_ERROR(
      Field(j, "agent_started_ms", Json::value_t::number_integer, "an integer"));
  TESSERA_RETURN_IF_ERROR(Field(j, "devices", Json::value_t::array, "an array"));
  TESSERA_RETURN_IF_ERROR(Field(j, "links", Json::value_t::array, "an array"));
  TESSERA_RETURN_IF_ERROR(Field(j, "workers", Json::value_t::array, "an array"));
  TESSERA_RETURN_IF_ERROR(Field(j, "wait_ms", Json::value_t::number_integer, "an integer"));
  TESSERA_RETURN_IF_ERROR(Field(j, "cpu_cores", Json::value_t::number_integer, "an integer"));
  HeartbeatRequest r;
  r.wait_ms = Get<int64_t>(j, "wait_ms", 0);
  if (r.wait_ms < 0 || r.wait_ms > 60'000) {
    return InvalidArgument("must be between 0 and 60000", "wait_ms");
  }
  TESSERA_RETURN_IF_ERROR(Field(j, "compact_launches", Json::value_t::boolean, "true or false"));
  r.compact_launches = Get<bool>(j, "compact_launches", false);  // absent: an older agent
  TESSERA_RETURN_IF_ERROR(Field(j, "inventory_unchanged", Json::value_t::boolean, "true or false"));
  r.inventory_unchanged = Get<bool>(j, "inventory_unchanged", false);
  r.cpu_cores = Get<int64_t>(j, "cpu_cores", 0);
  if (r.cpu_cores < 0 || r.cpu_cores > 65'536) {
    return InvalidArgument("must be between 0 and 65536", "cpu_cores");
  }
  TESSERA_RETURN_IF_ERROR(
      Field(j, "network_bandwidth_bytes_per_s", Json::value_t::number_float, "a number"));
  TESSERA_RETURN_IF_ERROR(Field(j, "network_latency_s", Json::value_t::number_float, "a number"));
  r.network_bandwidth_bytes_per_s = Get<double>(j, "network_bandwidth_bytes_per_s", 0.0);
  if (!(r.network_bandwidth_bytes_per_s >= 0) || !std::isfinite(r.network_bandwidth_bytes_per_s)) {
    return InvalidArgument("must be a number > 0 (0: unknown)", "network_bandwidth_bytes_per_s");
  }
  r.network_latency_s = Get<double>(j, "network_latency_s", 0.0);
  if (!(r.network_latency_s >= 0) || !std::isfinite(r.network_latency_s)) {
    return InvalidArgument("must be a number >= 0", "network_latency_s");
  }
  if (r.network_bandwidth_bytes_per_s == 0) r.network_latency_s = 0;  // no link known
  r.node = Get<std::string>(j, "node", "");
  if (r.node.empty()) return InvalidArgument("must name the node", "node");
  r.address = Get<std::string>(j, "address", "");
  r.agent_started_ms = Get<int64_t>(j, "agent_started_ms", 0);
  if (auto it = j.find("devices"); it != j.end() && it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      auto d = DeviceFromJson((*it)[i]);
      if (!d.ok()) return Nested(d.status(), "devices[" + std::to_string(i) + "]");
      r.devices.push_back(*std::move(d));
    }
  }
  if (auto it = j.find("links"); it != j.end() && it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      auto l = DeviceLinkFromJson((*it)[i]);
      if (!l.ok()) return Nested(l.status(), "links[" + std::to_string(i) + "]");
      r.links.push_back(*std::move(l));
    }
  }
  if (auto it = j.find("workers"); it != j.end() && it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& w = (*it)[i];
      std::string prefix = "workers[" + std::to_string(i) + "]";
      auto key = KeyFromJson(w);
      if (!key.ok()) return Nested(key.status(), prefix);
      WorkerStatus s;
      s.key = *key;
      Status st = Field(w, "pid", Json::value_t::number_integer, "an integer");
      if (st.ok()) st = Field(w, "exit_code", Json::value_t::number_integer, "an integer");
      if (st.ok()) st = Field(w, "state", Json::value_t::string, "a string");
      if (!st.ok()) return Nested(st, prefix);
      s.pid = Get<int64_t>(w, "pid", 0);
      s.exit_code = Get<int64_t>(w, "exit_code", 0);
      std::string state = Get<std::string>(w, "state", "running");
      if (state == "running") {
        s.state = WorkerState::kRunning;
      } else if (state == "exited") {
        s.state = WorkerState::kExited;
      } else if (state == "stopping") {
        s.state = WorkerState::kStopping;
      } else {
        return InvalidArgument("must be running, exited or stopping", prefix + ".state");
      }
      if (auto p = w.find("progress"); p != w.end()) s.progress = *p;
      if (auto p = w.find("progress_lines"); p != w.end() && !p->is_null()) {
        if (!p->is_array()) return InvalidArgument("must be an array", prefix + ".progress_lines");
        if (p->size() > kMaxProgressLinesPerWorker) {
          return InvalidArgument(
              "must hold at most " + std::to_string(kMaxProgressLinesPerWorker) + " lines",
              prefix + ".progress_lines");
        }
        for (const auto& line : *p) {
          if (!line.is_object()) {
            return InvalidArgument("must hold JSON objects", prefix + ".progress_lines");
          }
          s.progress_lines.push_back(line);
        }
      }
      if (auto t = w.find("log_tail"); t != w.end() && !t->is_null()) {
        if (!t->is_array()) return InvalidArgument("must be an array", prefix + ".log_tail");
        for (const auto& line : *t) {
          if (!line.is_string()) return InvalidArgument("must hold strings", prefix + ".log_tail");
          s.log_tail.push_back(line.get<std::string>());
        }
      }
      r.workers.push_back(std::move(s));
    }
  }
  return r;
}

Result<HeartbeatResponse> HeartbeatResponseFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("heartbeat answer must be a JSON object");
  TESSERA_RETURN_IF_ERROR(Field(j, "desired", Json::value_t::array, "an array"));
  TESSERA_RETURN_IF_ERROR(
      Field(j, "heartbeat_interval_ms", Json::value_t::number_integer, "an integer"));
  HeartbeatResponse r;
  r.heartbeat_interval_ms = Get<int64_t>(j, "heartbeat_interval_ms", 1000);
  for (const char* flag : {"accepts_unchanged_inventory", "send_inventory"}) {
    TESSERA_RETURN_IF_ERROR(Field(j, flag, Json::value_t::boolean, "true or false"));
  }
  r.accepts_unchanged_inventory = Get<bool>(j, "accepts_unchanged_inventory", false);
  r.send_inventory = Get<bool>(j, "send_inventory", false);
  if (auto it = j.find("desired"); it != j.end() && it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& l = (*it)[i];
      std::string prefix = "desired[" + std::to_string(i) + "]";
      auto key = KeyFromJson(l);
      if (!key.ok()) return Nested(key.status(), prefix);
      WorkerLaunch w;
      w.key = *key;
      try {
        w.argv = Get<std::vector<std::string>>(l, "argv", {});
        w.env = Get<std::map<std::string, std::string>>(l, "env", {});
        w.device_indices = Get<std::vector<int64_t>>(l, "device_indices", {});
        w.run_as = Get<std::string>(l, "run_as", "");
      } catch (const Json::exception& e) {
        return InvalidArgument(std::string("malformed launch: ") + e.what(), prefix);
      }
      if (w.argv.empty()) return InvalidArgument("must not be empty", prefix + ".argv");
      if (auto p = l.find("plan"); p != l.end()) w.plan = *p;
      if (auto ref = l.find("plan_ref"); ref != l.end()) {
        auto plans = j.find("plans");
        const Json* plan = nullptr;
        if (ref->is_string() && plans != j.end() && plans->is_object()) {
          auto found = plans->find(ref->get<std::string>());
          if (found != plans->end()) plan = &*found;
        }
        if (plan == nullptr) {
          return InvalidArgument("names no plan of \"plans\"", prefix + ".plan_ref");
        }
        w.plan = *plan;
      }
      r.desired.push_back(std::move(w));
    }
  }
  return r;
}

}  // namespace tessera::api
