#include "api/types.h"

#include <array>
#include <cmath>
#include <set>
#include <utility>

#include "api/json_codec.h"
#include "common/enum_names.h"
#include "common/json_fields.h"

namespace tessera::api {
namespace {

constexpr EnumName<JobKind> kJobKindNames[] = {
    {JobKind::kTrain, "train"},
    {JobKind::kInfer, "infer"},
};
static_assert(IsValidNameTable(kJobKindNames));

constexpr EnumName<JobState> kStateNames[] = {
    {JobState::kPending, "pending"},       {JobState::kPlanned, "planned"},
    {JobState::kStarting, "starting"},     {JobState::kRunning, "running"},
    {JobState::kRecovering, "recovering"}, {JobState::kSucceeded, "succeeded"},
    {JobState::kFailed, "failed"},         {JobState::kCancelled, "cancelled"},
};
static_assert(IsValidNameTable(kStateNames));

constexpr EnumName<Role> kRoleNames[] = {
    {Role::kUser, "user"},
    {Role::kAdmin, "admin"},
};
static_assert(IsValidNameTable(kRoleNames));

}  // namespace

std::string_view JobKindName(JobKind kind) { return NameOf(kJobKindNames, kind, "train"); }

std::optional<JobKind> ParseJobKind(std::string_view name) {
  return ParseName(kJobKindNames, name);
}

std::string_view JobStateName(JobState state) { return NameOf(kStateNames, state); }

std::optional<JobState> ParseJobState(std::string_view name) {
  return ParseName(kStateNames, name);
}

bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kCancelled;
}

std::string_view RoleName(Role role) { return NameOf(kRoleNames, role, "user"); }

std::optional<Role> ParseRole(std::string_view name) { return ParseName(kRoleNames, name); }

namespace {

constexpr JsonMember<JobSpec> kJobSpecMembers[] = {
    {"name", &JobSpec::name},
    {"kind",
     EnumMember<&JobSpec::kind, &JobKindName, &ParseJobKind>("must be \"train\" or \"infer\"")},
    {"entrypoint", &JobSpec::entrypoint},
    {"args", &JobSpec::args},
    {"dataset", &JobSpec::dataset},
    {"output", &JobSpec::output},
    {"checkpoint", &JobSpec::checkpoint},
    {"image_width", &JobSpec::image_width},
    {"image_height", &JobSpec::image_height},
    {"global_batch", &JobSpec::global_batch},
    {"steps", &JobSpec::steps},
    {"checkpoint_every_s", &JobSpec::checkpoint_every_s},
    {"layout", &JobSpec::layout},
    {"priority", &JobSpec::priority},
    {"max_attempts", &JobSpec::max_attempts},
    {"min_devices", &JobSpec::min_devices},
    {"max_devices", &JobSpec::max_devices},
    {"elastic", &JobSpec::elastic},
    {"env", &JobSpec::env},
};

// Job::spec: a nested JobSpec whose errors are named "spec.<field>".
Json JobSpecJson(const Job& job) { return ToJson(job.spec); }

Status ReadJobSpec(JsonFields& r, std::string_view key, Job* job) {
  Json spec;
  TESSERA_RETURN_IF_ERROR(r.Raw(key, &spec));
  if (spec.is_null()) return Status::Ok();
  auto parsed = JobSpecFromJson(spec);
  if (!parsed.ok()) {
    Status st = parsed.status();
    return Status(st.code(), st.message(), std::string(key) + "." + st.field());
  }
  job->spec = *std::move(parsed);
  return Status::Ok();
}

constexpr JsonMember<Job> kJobMembers[] = {
    {"id", &Job::id},
    {"owner", &Job::owner},
    {"spec", JsonCustom<Job>{&JobSpecJson, &ReadJobSpec}},
    {"state", EnumMember<&Job::state, &JobStateName, &ParseJobState>("unknown job state")},
    {"attempt", &Job::attempt},
    {"created_ms", &Job::created_ms},
    {"updated_ms", &Job::updated_ms},
    {"reason", &Job::reason},
    {"plan", &Job::plan},
    {"progress", &Job::progress},
    {"inference", &Job::inference},
};

constexpr JsonMember<Event> kEventMembers[] = {
    {"id", &Event::id},           {"job_id", &Event::job_id}, {"ts_ms", &Event::ts_ms},
    {"from", &Event::from_state}, {"to", &Event::to_state},   {"attempt", &Event::attempt},
    {"reason", &Event::reason},
};

}  // namespace

Json ToJson(const JobSpec& s) {
  Json j = MembersToJson(kJobSpecMembers, s);
  if (!s.image.empty()) j["image"] = ToJson(s.image);
  return j;
}

Result<JobSpec> JobSpecFromJson(const Json& j) {
  JobSpec s;
  JsonFields r(j);
  TESSERA_RETURN_IF_ERROR(ReadJsonObject(kJobSpecMembers, r, &s));
  nlohmann::json image;
  TESSERA_RETURN_IF_ERROR(r.Raw("image", &image));
  if (!image.is_null()) {
    TESSERA_ASSIGN_OR_RETURN(s.image, ImageConventionFromJson(image, "image"));
  }
  TESSERA_RETURN_IF_ERROR(r.NoUnknownFields());
  return s;
}

Json ToJson(const Job& job) { return MembersToJson(kJobMembers, job); }

Result<Job> JobFromJson(const Json& j) { return ObjectFromJson(kJobMembers, j); }

Json ToJson(const Event& e) { return MembersToJson(kEventMembers, e); }

Json ToJson(const QueueRow& q) {
  Json j{{"position", q.position},
         {"user", q.user},
         {"priority", q.priority},
         {"user_share", q.user_share},
         {"reason", q.reason}};
  j["id"] = q.id > 0 ? Json(q.id) : Json(nullptr);
  return j;
}

Result<Event> EventFromJson(const Json& j) { return ObjectFromJson(kEventMembers, j); }

namespace {

constexpr JsonMember<Device> kDeviceMembers[] = {
    {"node", &Device::node},
    {"index", &Device::index},
    {"name", &Device::name},
    {"uuid", &Device::uuid},
    {"type", &Device::type},
    {"memory_bytes", &Device::memory_bytes},
    {"memory_used_bytes", &Device::memory_used_bytes},
    {"utilization", &Device::utilization},
    {"measured_tflops", &Device::measured_tflops},
    {"measured_tflops_half", &Device::measured_tflops_half},
    {"mem_bandwidth_gbps", &Device::mem_bandwidth_gbps},
    {"relative_speed", &Device::relative_speed},
    {"compute_capability", &Device::compute_capability},
    {"sm_count", &Device::sm_count},
    {"emulated", &Device::emulated},
    {"busy", &Device::busy},
    {"measure_error", &Device::measure_error},
    {"profile_error", &Device::profile_error},
};

constexpr JsonMember<DeviceLink> kDeviceLinkMembers[] = {
    {"a", &DeviceLink::a},
    {"b", &DeviceLink::b},
    {"kind", &DeviceLink::kind},
    {"nvlink_count", &DeviceLink::nvlink_count},
    {"topology", &DeviceLink::topology},
};

// A node's own members; then come its devices, links and network.
constexpr JsonMember<Node> kNodeMembers[] = {
    {"name", &Node::name},           {"address", &Node::address},
    {"health", &Node::health},       {"last_heartbeat_ms", &Node::last_heartbeat_ms},
    {"cpu_cores", &Node::cpu_cores}, {"source", &Node::source},
};

// The members of a node's "network" object.
constexpr JsonMember<NodeLink> kNodeNetworkMembers[] = {
    {"bandwidth_bytes_per_s", &NodeLink::bandwidth_bytes_per_s},
    {"latency_s", &NodeLink::latency_s},
};

// The members of a node's "gloo_link" object.
constexpr JsonMember<NodeLink> kNodeGlooLinkMembers[] = {
    {"bandwidth_bytes_per_s", &NodeLink::bandwidth_bytes_per_s},
    {"latency_s", &NodeLink::latency_s},
    {"cpu_per_hop_s", &NodeLink::cpu_per_hop_s},
};

}  // namespace

Json ToJson(const Device& d) {
  Json j = MembersToJson(kDeviceMembers, d);
  if (!d.profiles.empty()) {
    Json profiles = Json::object();
    for (const auto& [model, profile] : d.profiles) profiles[model] = profile;
    j["profiles"] = std::move(profiles);
  }
  return j;
}

Result<Device> DeviceFromJson(const Json& j) {
  Device d;
  JsonFields r(j);
  TESSERA_RETURN_IF_ERROR(ReadJsonObject(kDeviceMembers, r, &d));
  Json profiles;
  TESSERA_RETURN_IF_ERROR(r.Raw("profiles", &profiles));
  if (profiles.is_null()) return d;
  if (!profiles.is_object()) return InvalidArgument("must be an object", "profiles");
  if (profiles.size() > kMaxDeviceProfiles) {
    return InvalidArgument("at most " + std::to_string(kMaxDeviceProfiles) + " profiles",
                           "profiles");
  }
  for (const auto& [model, profile] : profiles.items()) {
    const std::string field = "profiles." + model;
    if (model.empty() || model.size() > 64) {
      return InvalidArgument("a model name of 1 to 64 characters", "profiles");
    }
    if (!profile.is_object()) return InvalidArgument("must be an object", field);
    if (profile.dump().size() > kMaxDeviceProfileBytes) {
      return InvalidArgument("over " + std::to_string(kMaxDeviceProfileBytes / 1024) + " KiB",
                             field);
    }
    d.profiles[model] = profile;
  }
  return d;
}

Json ToJson(const DeviceLink& l) { return MembersToJson(kDeviceLinkMembers, l); }

Result<DeviceLink> DeviceLinkFromJson(const Json& j) {
  TESSERA_ASSIGN_OR_RETURN(DeviceLink l, ObjectFromJson(kDeviceLinkMembers, j));
  if (l.a < 0 || l.b <= l.a) return InvalidArgument("needs 0 <= a < b", "b");
  if (l.kind != "nvlink" && l.kind != "pcie" && l.kind != "system" && l.kind != "unknown") {
    return InvalidArgument("must be nvlink, pcie, system or unknown", "kind");
  }
  if (l.nvlink_count < 0) return InvalidArgument("must be >= 0", "nvlink_count");
  return l;
}

Json ToJson(const Node& n) {
  Json j = MembersToJson(kNodeMembers, n);
  j["devices"] = ToJsonArray(n.devices);
  j["links"] = ToJsonArray(n.links);
  j["network"] = n.network.known() ? MembersToJson(kNodeNetworkMembers, n.network) : Json(nullptr);
  j["gloo_link"] =
      n.gloo_link.known() ? MembersToJson(kNodeGlooLinkMembers, n.gloo_link) : Json(nullptr);
  return j;
}

namespace {

// A node's link object `name` (null: unknown) into *link.
template <size_t N>
Status ReadLinkObject(JsonFields& node, const char* name, const JsonMember<NodeLink> (&members)[N],
                      NodeLink* link) {
  api::Json object;
  TESSERA_RETURN_IF_ERROR(node.Raw(name, &object));
  if (object.is_null()) return Status::Ok();
  JsonFields fields(object, name);
  return ReadJsonObject(members, fields, link);
}

}  // namespace

Result<Node> NodeFromJson(const Json& j) {
  Node n;
  JsonFields r(j);
  TESSERA_RETURN_IF_ERROR(ReadJsonObject(kNodeMembers, r, &n));
  TESSERA_RETURN_IF_ERROR(ReadJsonList(r, "devices", &DeviceFromJson, &n.devices));
  TESSERA_RETURN_IF_ERROR(ReadJsonList(r, "links", &DeviceLinkFromJson, &n.links));
  TESSERA_RETURN_IF_ERROR(ReadLinkObject(r, "network", kNodeNetworkMembers, &n.network));
  TESSERA_RETURN_IF_ERROR(ReadLinkObject(r, "gloo_link", kNodeGlooLinkMembers, &n.gloo_link));
  return n;
}

Json ToJson(const Entrypoint& e) {
  return Json{{"name", e.name}, {"command", e.command}, {"description", e.description}};
}

Json ToJson(const JobPage& page) {
  return Json{{"jobs", ToJsonArray(page.jobs)}, {"next_after", JsonOrNull(page.next_after)}};
}

namespace {

// Where a MetricPoint stands; its figures follow.
constexpr JsonMember<MetricPoint> kMetricPointMembers[] = {
    {"step", &MetricPoint::step},
    {"attempt", &MetricPoint::attempt},
    {"rank", &MetricPoint::rank},
    {"ts_ms", &MetricPoint::ts_ms},
};

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
  Json j = MembersToJson(kMetricPointMembers, p);
  for (const MetricFigure& f : kMetricFigures) {
    if (f.real != nullptr && (p.*f.real).has_value()) j[f.name] = *(p.*f.real);
    if (f.integer != nullptr && (p.*f.integer).has_value()) j[f.name] = *(p.*f.integer);
  }
  return j;
}

Json ToJson(const MetricsPage& page) {
  return Json{{"job_id", page.job_id},
              {"points", ToJsonArray(page.points)},
              {"next_since", JsonOrNull(page.next_since)}};
}

Result<MetricPoint> MetricPointFromJson(const Json& j) {
  MetricPoint p;
  JsonFields r(j);
  TESSERA_RETURN_IF_ERROR(ReadJsonObject(kMetricPointMembers, r, &p));
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
  TESSERA_RETURN_IF_ERROR(ReadJsonList(r, "points", &MetricPointFromJson, &page.points));
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
