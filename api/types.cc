#include "api/types.h"

#include <array>
#include <cmath>
#include <set>
#include <utility>

#include "common/json_fields.h"

namespace tessera::api {
namespace {

constexpr std::array<std::pair<JobState, std::string_view>, 8> kStateNames = {{
    {JobState::kPending, "pending"},
    {JobState::kPlanned, "planned"},
    {JobState::kStarting, "starting"},
    {JobState::kRunning, "running"},
    {JobState::kRecovering, "recovering"},
    {JobState::kSucceeded, "succeeded"},
    {JobState::kFailed, "failed"},
    {JobState::kCancelled, "cancelled"},
}};

}  // namespace

std::string_view JobKindName(JobKind kind) { return kind == JobKind::kInfer ? "infer" : "train"; }

std::optional<JobKind> ParseJobKind(std::string_view name) {
  if (name == "train") return JobKind::kTrain;
  if (name == "infer") return JobKind::kInfer;
  return std::nullopt;
}

std::string_view JobStateName(JobState state) {
  for (const auto& [s, n] : kStateNames) {
    if (s == state) return n;
  }
  return "unknown";
}

std::optional<JobState> ParseJobState(std::string_view name) {
  for (const auto& [s, n] : kStateNames) {
    if (n == name) return s;
  }
  return std::nullopt;
}

bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kCancelled;
}

std::string_view RoleName(Role role) { return role == Role::kAdmin ? "admin" : "user"; }

std::optional<Role> ParseRole(std::string_view name) {
  if (name == "admin") return Role::kAdmin;
  if (name == "user") return Role::kUser;
  return std::nullopt;
}

Json ToJson(const JobSpec& s) {
  Json j = {
      {"name", s.name},
      {"kind", JobKindName(s.kind)},
      {"entrypoint", s.entrypoint},
      {"args", s.args},
      {"dataset", s.dataset},
      {"output", s.output},
      {"checkpoint", s.checkpoint},
      {"image_width", s.image_width},
      {"image_height", s.image_height},
      {"global_batch", s.global_batch},
      {"steps", s.steps},
      {"checkpoint_every_s", s.checkpoint_every_s},
      {"layout", s.layout},
      {"priority", s.priority},
      {"max_attempts", s.max_attempts},
      {"min_devices", s.min_devices},
      {"max_devices", s.max_devices},
      {"env", s.env},
  };
  if (!s.image.empty()) j["image"] = ToJson(s.image);
  return j;
}

Result<JobSpec> JobSpecFromJson(const Json& j) {
  JobSpec s;
  JsonFields r(j);
  TESSERA_RETURN_IF_ERROR(r.CheckObject());
  std::string kind = "train";
  TESSERA_RETURN_IF_ERROR(r.String("name", &s.name));
  TESSERA_RETURN_IF_ERROR(r.String("kind", &kind));
  auto parsed_kind = ParseJobKind(kind);
  if (!parsed_kind) return InvalidArgument("must be \"train\" or \"infer\"", "kind");
  s.kind = *parsed_kind;
  TESSERA_RETURN_IF_ERROR(r.String("entrypoint", &s.entrypoint));
  TESSERA_RETURN_IF_ERROR(r.StringList("args", &s.args));
  TESSERA_RETURN_IF_ERROR(r.String("dataset", &s.dataset));
  TESSERA_RETURN_IF_ERROR(r.String("output", &s.output));
  TESSERA_RETURN_IF_ERROR(r.String("checkpoint", &s.checkpoint));
  TESSERA_RETURN_IF_ERROR(r.Int("image_width", &s.image_width));
  TESSERA_RETURN_IF_ERROR(r.Int("image_height", &s.image_height));
  TESSERA_RETURN_IF_ERROR(r.Int("global_batch", &s.global_batch));
  TESSERA_RETURN_IF_ERROR(r.Int("steps", &s.steps));
  TESSERA_RETURN_IF_ERROR(r.Int("checkpoint_every_s", &s.checkpoint_every_s));
  TESSERA_RETURN_IF_ERROR(r.String("layout", &s.layout));
  TESSERA_RETURN_IF_ERROR(r.Int("priority", &s.priority));
  TESSERA_RETURN_IF_ERROR(r.Int("max_attempts", &s.max_attempts));
  TESSERA_RETURN_IF_ERROR(r.Int("min_devices", &s.min_devices));
  TESSERA_RETURN_IF_ERROR(r.Int("max_devices", &s.max_devices));
  TESSERA_RETURN_IF_ERROR(r.StringMap("env", &s.env));
  nlohmann::json image;
  TESSERA_RETURN_IF_ERROR(r.Raw("image", &image));
  if (!image.is_null()) {
    TESSERA_ASSIGN_OR_RETURN(s.image, ImageConventionFromJson(image, "image"));
  }
  TESSERA_RETURN_IF_ERROR(r.NoUnknownFields());
  return s;
}

Json ToJson(const Job& job) {
  return Json{
      {"id", job.id},
      {"owner", job.owner},
      {"spec", ToJson(job.spec)},
      {"state", JobStateName(job.state)},
      {"attempt", job.attempt},
      {"created_ms", job.created_ms},
      {"updated_ms", job.updated_ms},
      {"reason", job.reason},
      {"plan", job.plan},
      {"progress", job.progress},
      {"inference", job.inference},
  };
}

Result<Job> JobFromJson(const Json& j) {
  Job job;
  JsonFields r(j);
  TESSERA_RETURN_IF_ERROR(r.CheckObject());
  TESSERA_RETURN_IF_ERROR(r.Int("id", &job.id));
  TESSERA_RETURN_IF_ERROR(r.String("owner", &job.owner));
  Json spec;
  TESSERA_RETURN_IF_ERROR(r.Raw("spec", &spec));
  if (!spec.is_null()) {
    auto parsed = JobSpecFromJson(spec);
    if (!parsed.ok()) {
      Status st = parsed.status();
      return Status(st.code(), st.message(), "spec." + st.field());
    }
    job.spec = *std::move(parsed);
  }
  std::string state = "pending";
  TESSERA_RETURN_IF_ERROR(r.String("state", &state));
  auto parsed_state = ParseJobState(state);
  if (!parsed_state) return InvalidArgument("unknown job state", "state");
  job.state = *parsed_state;
  TESSERA_RETURN_IF_ERROR(r.Int("attempt", &job.attempt));
  TESSERA_RETURN_IF_ERROR(r.Int("created_ms", &job.created_ms));
  TESSERA_RETURN_IF_ERROR(r.Int("updated_ms", &job.updated_ms));
  TESSERA_RETURN_IF_ERROR(r.String("reason", &job.reason));
  TESSERA_RETURN_IF_ERROR(r.Raw("plan", &job.plan));
  TESSERA_RETURN_IF_ERROR(r.Raw("progress", &job.progress));
  TESSERA_RETURN_IF_ERROR(r.Raw("inference", &job.inference));
  return job;
}

Json ToJson(const Event& e) {
  return Json{{"id", e.id},           {"job_id", e.job_id}, {"ts_ms", e.ts_ms},
              {"from", e.from_state}, {"to", e.to_state},   {"attempt", e.attempt},
              {"reason", e.reason}};
}

Json ToJson(const QueueRow& q) {
  Json j{{"position", q.position},
         {"user", q.user},
         {"priority", q.priority},
         {"user_share", q.user_share},
         {"reason", q.reason}};
  j["id"] = q.id > 0 ? Json(q.id) : Json(nullptr);
  return j;
}

Result<Event> EventFromJson(const Json& j) {
  Event e;
  JsonFields r(j);
  TESSERA_RETURN_IF_ERROR(r.CheckObject());
  TESSERA_RETURN_IF_ERROR(r.Int("id", &e.id));
  TESSERA_RETURN_IF_ERROR(r.Int("job_id", &e.job_id));
  TESSERA_RETURN_IF_ERROR(r.Int("ts_ms", &e.ts_ms));
  TESSERA_RETURN_IF_ERROR(r.String("from", &e.from_state));
  TESSERA_RETURN_IF_ERROR(r.String("to", &e.to_state));
  TESSERA_RETURN_IF_ERROR(r.Int("attempt", &e.attempt));
  TESSERA_RETURN_IF_ERROR(r.String("reason", &e.reason));
  return e;
}

Json ToJson(const Device& d) {
  return Json{{"node", d.node},
              {"index", d.index},
              {"name", d.name},
              {"uuid", d.uuid},
              {"type", d.type},
              {"memory_bytes", d.memory_bytes},
              {"memory_used_bytes", d.memory_used_bytes},
              {"utilization", d.utilization},
              {"measured_tflops", d.measured_tflops},
              {"measured_tflops_half", d.measured_tflops_half},
              {"mem_bandwidth_gbps", d.mem_bandwidth_gbps},
              {"relative_speed", d.relative_speed},
              {"compute_capability", d.compute_capability},
              {"sm_count", d.sm_count},
              {"emulated", d.emulated},
              {"busy", d.busy},
              {"measure_error", d.measure_error}};
}

Result<Device> DeviceFromJson(const Json& j) {
  Device d;
  JsonFields r(j);
  TESSERA_RETURN_IF_ERROR(r.CheckObject());
  TESSERA_RETURN_IF_ERROR(r.String("node", &d.node));
  TESSERA_RETURN_IF_ERROR(r.Int("index", &d.index));
  TESSERA_RETURN_IF_ERROR(r.String("name", &d.name));
  TESSERA_RETURN_IF_ERROR(r.String("uuid", &d.uuid));
  TESSERA_RETURN_IF_ERROR(r.String("type", &d.type));
  TESSERA_RETURN_IF_ERROR(r.Int("memory_bytes", &d.memory_bytes));
  TESSERA_RETURN_IF_ERROR(r.Int("memory_used_bytes", &d.memory_used_bytes));
  TESSERA_RETURN_IF_ERROR(r.Double("utilization", &d.utilization));
  TESSERA_RETURN_IF_ERROR(r.Double("measured_tflops", &d.measured_tflops));
  TESSERA_RETURN_IF_ERROR(r.Double("measured_tflops_half", &d.measured_tflops_half));
  TESSERA_RETURN_IF_ERROR(r.Double("mem_bandwidth_gbps", &d.mem_bandwidth_gbps));
  TESSERA_RETURN_IF_ERROR(r.Double("relative_speed", &d.relative_speed));
  TESSERA_RETURN_IF_ERROR(r.String("compute_capability", &d.compute_capability));
  TESSERA_RETURN_IF_ERROR(r.Int("sm_count", &d.sm_count));
  TESSERA_RETURN_IF_ERROR(r.Bool("emulated", &d.emulated));
  TESSERA_RETURN_IF_ERROR(r.Bool("busy", &d.busy));
  TESSERA_RETURN_IF_ERROR(r.String("measure_error", &d.measure_error));
  return d;
}

Json ToJson(const DeviceLink& l) {
  return Json{{"a", l.a},
              {"b", l.b},
              {"kind", l.kind},
              {"nvlink_count", l.nvlink_count},
              {"topology", l.topology}};
}

Result<DeviceLink> DeviceLinkFromJson(const Json& j) {
  DeviceLink l;
  JsonFields r(j);
  TESSERA_RETURN_IF_ERROR(r.CheckObject());
  TESSERA_RETURN_IF_ERROR(r.Int("a", &l.a));
  TESSERA_RETURN_IF_ERROR(r.Int("b", &l.b));
  TESSERA_RETURN_IF_ERROR(r.String("kind", &l.kind));
  TESSERA_RETURN_IF_ERROR(r.Int("nvlink_count", &l.nvlink_count));
  TESSERA_RETURN_IF_ERROR(r.String("topology", &l.topology));
  if (l.a < 0 || l.b <= l.a) return InvalidArgument("needs 0 <= a < b", "b");
  if (l.kind != "nvlink" && l.kind != "pcie" && l.kind != "system" && l.kind != "unknown") {
    return InvalidArgument("must be nvlink, pcie, system or unknown", "kind");
  }
  if (l.nvlink_count < 0) return InvalidArgument("must be >= 0", "nvlink_count");
  return l;
}

Json ToJson(const Node& n) {
  Json devices = Json::array();
  for (const auto& d : n.devices) devices.push_back(ToJson(d));
  Json links = Json::array();
  for (const auto& l : n.links) links.push_back(ToJson(l));
  Json network = nullptr;
  if (n.network_bandwidth_bytes_per_s > 0) {
    network = Json{{"bandwidth_bytes_per_s", n.network_bandwidth_bytes_per_s},
                   {"latency_s", n.network_latency_s}};
  }
  return Json{{"name", n.name},           {"address", n.address},
              {"health", n.health},       {"last_heartbeat_ms", n.last_heartbeat_ms},
              {"devices", devices},       {"links", links},
              {"cpu_cores", n.cpu_cores}, {"network", network},
              {"source", n.source}};
}

namespace {

// Reads the optional array `key` of r's object into *out with `parse`; an
// element's error names "key[i].field".
template <typename T>
Status ReadList(JsonFields& r, const char* key, Result<T> (*parse)(const Json&),
                std::vector<T>* out) {
  TESSERA_ASSIGN_OR_RETURN(const Json* items, r.Array(key));
  if (items != nullptr) {
    for (size_t i = 0; i < items->size(); ++i) {
      Result<T> item = parse((*items)[i]);
      if (!item.ok()) {
        const Status& e = item.status();
        return Status(e.code(), e.message(),
                      std::string(key) + "[" + std::to_string(i) + "]" +
                          (e.field().empty() ? "" : ".") + e.field());
      }
      out->push_back(*std::move(item));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<Node> NodeFromJson(const Json& j) {
  Node n;
  JsonFields r(j);
  TESSERA_RETURN_IF_ERROR(r.CheckObject());
  TESSERA_RETURN_IF_ERROR(r.String("name", &n.name));
  TESSERA_RETURN_IF_ERROR(r.String("address", &n.address));
  TESSERA_RETURN_IF_ERROR(r.String("health", &n.health));
  TESSERA_RETURN_IF_ERROR(r.Int("last_heartbeat_ms", &n.last_heartbeat_ms));
  TESSERA_RETURN_IF_ERROR(r.Int("cpu_cores", &n.cpu_cores));
  TESSERA_RETURN_IF_ERROR(r.String("source", &n.source));
  TESSERA_RETURN_IF_ERROR(ReadList(r, "devices", &DeviceFromJson, &n.devices));
  TESSERA_RETURN_IF_ERROR(ReadList(r, "links", &DeviceLinkFromJson, &n.links));
  api::Json network;
  TESSERA_RETURN_IF_ERROR(r.Raw("network", &network));
  if (!network.is_null()) {
    JsonFields link(network, "network");
    TESSERA_RETURN_IF_ERROR(link.CheckObject());
    TESSERA_RETURN_IF_ERROR(link.Double("bandwidth_bytes_per_s", &n.network_bandwidth_bytes_per_s));
    TESSERA_RETURN_IF_ERROR(link.Double("latency_s", &n.network_latency_s));
  }
  return n;
}

Json ToJson(const Entrypoint& e) {
  return Json{{"name", e.name}, {"command", e.command}, {"description", e.description}};
}

Json ToJson(const JobPage& page) {
  Json jobs = Json::array();
  for (const auto& job : page.jobs) jobs.push_back(ToJson(job));
  Json j = {{"jobs", jobs}};
  if (page.next_after) {
    j["next_after"] = *page.next_after;
  } else {
    j["next_after"] = nullptr;
  }
  return j;
}

namespace {

// The optional figures of a MetricPoint, by JSON name.
struct MetricFigure {
  const char* name;
  std::optional<double> MetricPoint::*real;
  std::optional<int64_t> MetricPoint::*integer;
};
constexpr MetricFigure kMetricFigures[] = {
    {"loss", &MetricPoint::loss, nullptr},
    {"samples_per_s", &MetricPoint::samples_per_s, nullptr},
    {"compute_s", &MetricPoint::compute_s, nullptr},
    {"comm_s", &MetricPoint::comm_s, nullptr},
    {"bubble_s", &MetricPoint::bubble_s, nullptr},
    {"peak_memory_bytes", nullptr, &MetricPoint::peak_memory_bytes},
    {"predicted_peak_memory_bytes", nullptr, &MetricPoint::predicted_peak_memory_bytes},
};

// An integer JSON value (or a float with an integral value, as JSON writers
// may print large counts), else nullopt.
std::optional<int64_t> IntegerOf(const Json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > uint64_t{INT64_MAX}) return std::nullopt;
    return static_cast<int64_t>(v.get<uint64_t>());
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15) return std::nullopt;
    return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

}  // namespace

Json ToJson(const MetricPoint& p) {
  Json j = {{"step", p.step}, {"attempt", p.attempt}, {"rank", p.rank}, {"ts_ms", p.ts_ms}};
  for (const MetricFigure& f : kMetricFigures) {
    if (f.real != nullptr && (p.*f.real).has_value()) j[f.name] = *(p.*f.real);
    if (f.integer != nullptr && (p.*f.integer).has_value()) j[f.name] = *(p.*f.integer);
  }
  return j;
}

Json ToJson(const MetricsPage& page) {
  Json points = Json::array();
  for (const MetricPoint& p : page.points) points.push_back(ToJson(p));
  Json j = {{"job_id", page.job_id}, {"points", std::move(points)}};
  j["next_since"] = page.next_since ? Json(*page.next_since) : Json(nullptr);
  return j;
}

Result<MetricPoint> MetricPointFromJson(const Json& j) {
  MetricPoint p;
  JsonFields r(j);
  TESSERA_RETURN_IF_ERROR(r.CheckObject());
  TESSERA_RETURN_IF_ERROR(r.Int("step", &p.step));
  TESSERA_RETURN_IF_ERROR(r.Int("attempt", &p.attempt));
  TESSERA_RETURN_IF_ERROR(r.Int("rank", &p.rank));
  TESSERA_RETURN_IF_ERROR(r.Int("ts_ms", &p.ts_ms));
  for (const MetricFigure& f : kMetricFigures) {
    Json v;
    TESSERA_RETURN_IF_ERROR(r.Raw(f.name, &v));
    if (v.is_null()) continue;
    if (f.real != nullptr) {
      if (!v.is_number()) return InvalidArgument("must be a number", f.name);
      p.*f.real = v.get<double>();
    } else {
      std::optional<int64_t> n = IntegerOf(v);
      if (!n) return InvalidArgument("must be an integer", f.name);
      p.*f.integer = *n;
    }
  }
  return p;  // fields a newer tesserad adds are ignored
}

Result<MetricsPage> MetricsPageFromJson(const Json& j) {
  MetricsPage page;
  JsonFields r(j);
  TESSERA_RETURN_IF_ERROR(r.CheckObject());
  TESSERA_RETURN_IF_ERROR(r.Int("job_id", &page.job_id));
  TESSERA_RETURN_IF_ERROR(ReadList(r, "points", &MetricPointFromJson, &page.points));
  Json next;
  TESSERA_RETURN_IF_ERROR(r.Raw("next_since", &next));
  if (!next.is_null()) {
    std::optional<int64_t> n = IntegerOf(next);
    if (!n) return InvalidArgument("must be an integer", "next_since");
    page.next_since = *n;
  }
  return page;
}

std::optional<MetricPoint> MetricPointFromProgressLine(const Json& line, int64_t attempt,
                                                       int64_t rank, int64_t received_ms) {
  if (!line.is_object()) return std::nullopt;
  auto step_it = line.find("step");
  if (step_it == line.end()) return std::nullopt;
  std::optional<int64_t> step = IntegerOf(*step_it);
  if (!step || *step < 0) return std::nullopt;
  MetricPoint p;
  p.step = *step;
  p.attempt = attempt;
  p.rank = rank;
  p.ts_ms = received_ms;
  if (auto ts = line.find("ts_ms"); ts != line.end()) {
    if (std::optional<int64_t> t = IntegerOf(*ts); t && *t > 0) p.ts_ms = *t;
  }
  for (const MetricFigure& f : kMetricFigures) {
    auto it = line.find(f.name);
    if (it == line.end() || !it->is_number()) continue;
    if (f.real != nullptr) {
      const double v = it->get<double>();
      if (std::isfinite(v)) p.*f.real = v;
    } else if (std::optional<int64_t> n = IntegerOf(*it)) {
      p.*f.integer = *n;
    }
  }
  return p;
}

}  // namespace tessera::api
