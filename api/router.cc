#include "api/router.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <future>
#include <memory>
#include <optional>

#include "api/agent_protocol.h"
#include "api/entrypoint_kind.h"
#include "api/http_status.h"
#include "api/job_spec_validation.h"
#include "api/json_codec.h"
#include "api/lease_protocol.h"
#include "api/node_identity.h"
#include "api/responder.h"
#include "api/static_files.h"
#include "api/url.h"
#include "common/json_fields.h"
#include "common/quantities.h"

namespace tessera::api {
namespace {

constexpr std::string_view kJsonType = "application/json";
constexpr std::string_view kTextType = "text/plain; charset=utf-8";
constexpr std::string_view kMetricsType = "text/plain; version=0.0.4; charset=utf-8";

// Everything a route handler needs.
struct Call {
  const Request& req;
  ControlPlane& cp;
  const RouterOptions& options;
  HttpMetrics* metrics;
  Target target;
  std::vector<std::string> params;  // decoded {placeholders}, in order
  Principal who;
  std::string node;  // the node whose credential authenticated (RouteAuth::kAgent)
};

using RouteFn = Response (*)(Call&);
// A route that may answer later: it sends through the Responder (exactly
// once, from any thread) and must not keep the Call past its return.
using AsyncRouteFn = void (*)(Call&, Responder);

std::string_view BearerToken(const Request& req);

struct Route {
  RouteInfo info;
  RouteFn fn = nullptr;
  AsyncRouteFn async_fn = nullptr;  // set instead of fn
};

Response JsonResponse(int status, const Json& body) {
  Response r;
  r.status = status;
  r.content_type = std::string(kJsonType);
  r.body = DumpJson(body);
  return r;
}

Response TextResponse(int status, std::string body, std::string_view type = kTextType) {
  Response r;
  r.status = status;
  r.content_type = std::string(type);
  r.body = std::move(body);
  return r;
}

// Parses a decimal integer in [lo, hi]; errors name `field`.
Result<int64_t> ParseInt(std::string_view text, int64_t lo, int64_t hi, const std::string& field) {
  const std::optional<int64_t> parsed = ParseWholeNumber(text);
  if (!parsed) return InvalidArgument("must be an integer", field);
  const int64_t v = *parsed;
  if (v < lo || v > hi) {
    return InvalidArgument("must be between " + std::to_string(lo) + " and " + std::to_string(hi),
                           field);
  }
  return v;
}

// Optional integer query parameter with a default.
Result<int64_t> QueryInt(const Call& c, const std::string& name, int64_t def, int64_t lo,
                         int64_t hi) {
  auto it = c.target.query.find(name);
  if (it == c.target.query.end()) return def;
  return ParseInt(it->second, lo, hi, name);
}

Result<JobId> PathId(const Call& c) {
  // Ids are positive decimal integers; anything else names "id".
  return ParseInt(c.params.at(0), 1, INT64_MAX, "id");
}

Result<Json> ParseBody(const Call& c) {
  Json j = Json::parse(c.req.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("is not valid JSON", "body");
  return j;
}

Result<JobSpec> ParseSpec(const Call& c) {
  TESSERA_ASSIGN_OR_RETURN(Json j, ParseBody(c));
  if (!j.is_object()) return InvalidArgument("must be a JSON object", "body");
  TESSERA_ASSIGN_OR_RETURN(JobSpec spec, JobSpecFromJson(j));
  TESSERA_RETURN_IF_ERROR(ValidateJobSpec(spec));
  return spec;
}

#define TESSERA_ROUTE_ASSIGN(lhs, expr)                                 \
  auto TESSERA_CONCAT_(route_r_, __LINE__) = (expr);                    \
  if (!TESSERA_CONCAT_(route_r_, __LINE__).ok()) {                      \
    return ErrorResponse(TESSERA_CONCAT_(route_r_, __LINE__).status()); \
  }                                                                     \
  lhs = std::move(TESSERA_CONCAT_(route_r_, __LINE__)).value()

#define TESSERA_ROUTE_CHECK(expr)                       \
  do {                                                  \
    ::tessera::Status route_s_ = (expr);                \
    if (!route_s_.ok()) return ErrorResponse(route_s_); \
  } while (0)

// ---- routes ----

Response Healthz(Call&) { return TextResponse(200, "ok\n"); }

Response Readyz(Call& c) {
  Status st = c.cp.Ready();
  if (!st.ok()) {
    // Not ready is never a client error: always 503.
    Response r = ErrorResponse(Status(StatusCode::kUnavailable, st.message()));
    return r;
  }
  return TextResponse(200, "ready\n");
}

Response Metrics(Call& c) {
  std::string out;
  if (c.metrics != nullptr) c.metrics->AppendPrometheus(&out);
  c.cp.AppendMetrics(&out);
  return TextResponse(200, std::move(out), kMetricsType);
}

Response SubmitJob(Call& c) {
  TESSERA_ROUTE_ASSIGN(JobSpec spec, ParseSpec(c));
  TESSERA_ROUTE_ASSIGN(Job job, c.cp.SubmitJob(c.who, spec));
  Response r = JsonResponse(201, ToJson(job));
  r.headers.emplace_back("Location", "/api/v1/jobs/" + std::to_string(job.id));
  return r;
}

Response ListJobs(Call& c) {
  JobQuery q;
  if (auto it = c.target.query.find("state"); it != c.target.query.end()) {
    auto state = ParseJobState(it->second);
    if (!state) {
      return ErrorResponse(InvalidArgument(
          "must be one of pending, planned, starting, running, recovering, succeeded, failed, "
          "cancelled",
          "state"));
    }
    q.state = *state;
  }
  if (auto it = c.target.query.find("owner"); it != c.target.query.end()) {
    if (it->second.empty() || it->second.size() > kMaxNameLength) {
      return ErrorResponse(InvalidArgument("must be 1..128 characters", "owner"));
    }
    q.owner = it->second;
  }
  TESSERA_ROUTE_ASSIGN(q.limit, QueryInt(c, "limit", 50, 1, 500));
  TESSERA_ROUTE_ASSIGN(q.after, QueryInt(c, "after", 0, 0, INT64_MAX));
  TESSERA_ROUTE_ASSIGN(JobPage page, c.cp.ListJobs(c.who, q));
  return JsonResponse(200, ToJson(page));
}

Response GetJob(Call& c) {
  TESSERA_ROUTE_ASSIGN(JobId id, PathId(c));
  TESSERA_ROUTE_ASSIGN(Job job, c.cp.GetJob(c.who, id));
  return JsonResponse(200, ToJson(job));
}

Response CancelJob(Call& c) {
  TESSERA_ROUTE_ASSIGN(JobId id, PathId(c));
  TESSERA_ROUTE_ASSIGN(Job job, c.cp.CancelJob(c.who, id));
  return JsonResponse(200, ToJson(job));
}

Response ListEvents(Call& c) {
  TESSERA_ROUTE_ASSIGN(JobId id, PathId(c));
  TESSERA_ROUTE_ASSIGN(int64_t after, QueryInt(c, "after", 0, 0, INT64_MAX));
  TESSERA_ROUTE_ASSIGN(int64_t limit, QueryInt(c, "limit", 100, 1, 1000));
  TESSERA_ROUTE_ASSIGN(std::vector<Event> events, c.cp.ListEvents(c.who, id, after, limit));
  Json body = {{"events", ToJsonArray(events)}, {"next_after", nullptr}};
  if (!events.empty() && static_cast<int64_t>(events.size()) >= limit) {
    body["next_after"] = events.back().id;
  }
  return JsonResponse(200, body);
}

Response JobLogs(Call& c) {
  TESSERA_ROUTE_ASSIGN(JobId id, PathId(c));
  TESSERA_ROUTE_ASSIGN(int64_t rank, QueryInt(c, "rank", 0, 0, kMaxDevices - 1));
  TESSERA_ROUTE_ASSIGN(int64_t tail, QueryInt(c, "tail", 100, 1, 100));
  TESSERA_ROUTE_ASSIGN(std::vector<std::string> lines, c.cp.JobLogs(c.who, id, rank, tail));
  return JsonResponse(200, Json{{"job_id", id}, {"rank", rank}, {"lines", std::move(lines)}});
}

Response JobMetrics(Call& c) {
  MetricsQuery q;
  TESSERA_ROUTE_ASSIGN(q.job_id, PathId(c));
  if (c.target.query.contains("rank")) {
    TESSERA_ROUTE_ASSIGN(q.rank, QueryInt(c, "rank", 0, 0, kMaxDevices - 1));
  }
  if (c.target.query.contains("attempt")) {
    TESSERA_ROUTE_ASSIGN(q.attempt, QueryInt(c, "attempt", 0, 0, INT64_MAX));
  }
  if (c.target.query.contains("since")) {
    TESSERA_ROUTE_ASSIGN(q.since, QueryInt(c, "since", 0, 0, INT64_MAX));
  }
  TESSERA_ROUTE_ASSIGN(q.limit, QueryInt(c, "limit", 1000, 1, kMaxMetricsPageSize));
  TESSERA_ROUTE_ASSIGN(MetricsPage page, c.cp.JobMetrics(c.who, q));
  return JsonResponse(200, ToJson(page));
}

Response LeaseChunks(Call& c) {
  TESSERA_ROUTE_ASSIGN(JobId id, PathId(c));
  TESSERA_ROUTE_ASSIGN(Json j, ParseBody(c));
  TESSERA_ROUTE_ASSIGN(LeaseRequest request, LeaseRequestFromJson(j));
  TESSERA_ROUTE_ASSIGN(LeaseResponse answer, c.cp.LeaseChunks(id, BearerToken(c.req), request));
  return JsonResponse(200, ToJson(answer));
}

Response ListNodes(Call& c) {
  TESSERA_ROUTE_ASSIGN(std::vector<Node> nodes, c.cp.ListNodes(c.who));
  Json list = Json::array();
  for (const Node& n : nodes) {
    Json j = ToJson(n);
    // The measured profiles are the planner's (kilobytes each): listed by model name.
    for (Json& d : j["devices"]) {
      auto it = d.find("profiles");
      if (it == d.end()) continue;
      Json models = Json::array();
      for (const auto& [model, profile] : it->items()) models.push_back(model);
      d.erase(it);
      d["profiled_models"] = std::move(models);
    }
    list.push_back(std::move(j));
  }
  return JsonResponse(200, Json{{"nodes", std::move(list)}});
}

Response Queue(Call& c) {
  TESSERA_ROUTE_ASSIGN(std::vector<QueueRow> rows, c.cp.Queue(c.who));
  return JsonResponse(200, Json{{"queue", ToJsonArray(rows)}});
}

Response PreviewPlan(Call& c) {
  TESSERA_ROUTE_ASSIGN(JobSpec spec, ParseSpec(c));
  TESSERA_ROUTE_ASSIGN(Json plans, c.cp.PreviewPlan(c.who, spec));
  // A model profile still being measured is a state to wait for, not an
  // error: 202 and when to ask again.
  auto state = plans.is_object() ? plans.find("state") : plans.end();
  if (state != plans.end() && *state == "measuring_profile") {
    int64_t retry = 1;
    if (auto it = plans.find("retry_after_s"); it != plans.end() && it->is_number_integer()) {
      retry = std::max<int64_t>(1, it->get<int64_t>());
    }
    Response r = JsonResponse(202, plans);
    r.headers.emplace_back("Retry-After", std::to_string(retry));
    return r;
  }
  return JsonResponse(200, plans);
}

Response ListEntrypoints(Call& c) {
  TESSERA_ROUTE_ASSIGN(std::vector<Entrypoint> eps, c.cp.ListEntrypoints(c.who));
  return JsonResponse(200, Json{{"entrypoints", ToJsonArray(eps)}});
}

Result<Entrypoint> ParseEntrypoint(const Json& j) {
  if (!j.is_object()) return InvalidArgument("must be a JSON object", "body");
  Entrypoint e;
  JsonFields fields(j);
  TESSERA_RETURN_IF_ERROR(fields.String("name", &e.name));
  TESSERA_RETURN_IF_ERROR(fields.String("command", &e.command));
  TESSERA_RETURN_IF_ERROR(fields.String("description", &e.description));
  TESSERA_RETURN_IF_ERROR(fields.NoUnknownFields());
  TESSERA_RETURN_IF_ERROR(ValidateEntrypointName(e.name, "name"));
  if (e.command.find('\0') != std::string::npos) {
    return InvalidArgument("must not contain NUL bytes", "command");
  }
  const EntrypointKind kind = EntrypointKindOf(e.name);
  if (HasCommandPath(kind)) {
    if (e.command.empty() || e.command.front() != '/') {
      return InvalidArgument(kind == EntrypointKind::kModel
                                 ? "must be the absolute path of the exported model file"
                                 : "must be the absolute path of the executable",
                             "command");
    }
    if (e.command.size() > kMaxStringLength) return InvalidArgument("is too long", "command");
  } else if (!e.command.empty()) {
    return InvalidArgument("must be empty for builtin: entrypoints", "command");
  }
  if (e.description.find('\0') != std::string::npos) {
    return InvalidArgument("must not contain NUL bytes", "description");
  }
  if (e.description.size() > 1024) {
    return InvalidArgument("must be at most 1024 bytes", "description");
  }
  return e;
}

Response AllowEntrypoint(Call& c) {
  TESSERA_ROUTE_ASSIGN(Json j, ParseBody(c));
  TESSERA_ROUTE_ASSIGN(Entrypoint e, ParseEntrypoint(j));
  TESSERA_ROUTE_CHECK(c.cp.AllowEntrypoint(c.who, e));
  Response r = JsonResponse(201, ToJson(e));
  r.headers.emplace_back("Location", "/api/v1/entrypoints/" + PercentEncode(e.name));
  return r;
}

Response DisallowEntrypoint(Call& c) {
  const std::string& name = c.params.at(0);
  TESSERA_ROUTE_CHECK(ValidateEntrypointName(name, "name"));
  TESSERA_ROUTE_CHECK(c.cp.DisallowEntrypoint(c.who, name));
  Response r;
  r.status = 204;
  r.content_type.clear();
  return r;
}

void AgentHeartbeat(Call& c, Responder done) {
  Json j = Json::parse(c.req.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return done.Send(ErrorResponse(InvalidArgument("is not valid JSON", "body")));
  Result<HeartbeatRequest> parsed = HeartbeatRequestFromJson(j);
  if (!parsed.ok()) {
    Status st = parsed.status();
    if (st.field().empty()) st = Status(st.code(), st.message(), "body");
    return done.Send(ErrorResponse(st));
  }
  const HeartbeatRequest& hb = *parsed;
  if (hb.node.empty() || hb.node.size() > 253 || hb.node.find('\0') != std::string::npos) {
    return done.Send(ErrorResponse(InvalidArgument("must be 1..253 characters", "node")));
  }
  // A credential speaks for its own node only: no posing as another one
  // (and so no receiving its launches or reporting its ranks gone).
  if (hb.node != c.node) {
    return done.Send(ErrorResponse(
        Status(StatusCode::kPermissionDenied,
               "this credential belongs to node " + c.node + ", not " + hb.node, "node")));
  }
  // Parked until the node has work or its wait ends: answered from the
  // thread that completes it, not from this one.
  c.cp.HeartbeatAsync(j, [done](Result<Json> answer) {
    done.Send(answer.ok() ? JsonResponse(200, *answer) : ErrorResponse(answer.status()));
  });
}

// ---- node identity (api/node_identity.h) ----

Response EnrolNode(Call& c) {
  TESSERA_ROUTE_ASSIGN(Json j, ParseBody(c));
  TESSERA_ROUTE_ASSIGN(std::string node, EnrolRequestNodeFromJson(j));
  TESSERA_ROUTE_ASSIGN(IssuedNodeCredential issued, c.cp.EnrolNode(node));
  Response r = JsonResponse(201, ToJson(issued));
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

Response ListNodeEnrolments(Call& c) {
  TESSERA_ROUTE_ASSIGN(std::vector<NodeEnrolment> list, c.cp.ListNodeEnrolments(c.who));
  return JsonResponse(200, Json{{"enrolments", ToJsonArray(list)}});
}

Response NoContent() {
  Response r;
  r.status = 204;
  r.content_type.clear();
  return r;
}

Response RevokeNode(Call& c) {
  const std::string& name = c.params.at(0);
  TESSERA_ROUTE_CHECK(ValidateNodeName(name, "name"));
  TESSERA_ROUTE_CHECK(c.cp.RevokeNode(c.who, name));
  return NoContent();
}

Response ReadmitNode(Call& c) {
  const std::string& name = c.params.at(0);
  TESSERA_ROUTE_CHECK(ValidateNodeName(name, "name"));
  TESSERA_ROUTE_CHECK(c.cp.ReadmitNode(c.who, name));
  return NoContent();
}

Response JoinBundle(Call& c) {
  TESSERA_ROUTE_ASSIGN(Json bundle, c.cp.JoinBundle(c.who));
  Response r = JsonResponse(200, bundle);
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

const std::vector<Route>& Routes() {
  static const std::vector<Route> kRoutes = {
      {{"GET", "/healthz", RouteAuth::kNone, {}}, &Healthz},
      {{"GET", "/readyz", RouteAuth::kNone, {}}, &Readyz},
      {{"GET", "/metrics", RouteAuth::kNone, {}}, &Metrics},
      {{"POST", "/api/v1/jobs", RouteAuth::kUser, {}}, &SubmitJob},
      {{"GET", "/api/v1/jobs", RouteAuth::kUser, {"state", "owner", "limit", "after"}}, &ListJobs},
      {{"GET", "/api/v1/jobs/{id}", RouteAuth::kUser, {}}, &GetJob},
      {{"POST", "/api/v1/jobs/{id}/cancel", RouteAuth::kUser, {}}, &CancelJob},
      {{"GET", "/api/v1/jobs/{id}/events", RouteAuth::kUser, {"after", "limit"}}, &ListEvents},
      {{"GET", "/api/v1/jobs/{id}/logs", RouteAuth::kUser, {"rank", "tail"}}, &JobLogs},
      {{"GET",
        "/api/v1/jobs/{id}/metrics",
        RouteAuth::kUser,
        {"rank", "attempt", "since", "limit"}},
       &JobMetrics},
      {{"POST", "/api/v1/jobs/{id}/leases", RouteAuth::kLease, {}}, &LeaseChunks},
      {{"GET", "/api/v1/queue", RouteAuth::kUser, {}}, &Queue},
      {{"GET", "/api/v1/nodes", RouteAuth::kUser, {}}, &ListNodes},
      {{"GET", "/api/v1/nodes/enrolments", RouteAuth::kUser, {}}, &ListNodeEnrolments},
      {{"DELETE", "/api/v1/nodes/{name}", RouteAuth::kUser, {}}, &RevokeNode},
      {{"POST", "/api/v1/nodes/{name}/readmit", RouteAuth::kUser, {}}, &ReadmitNode},
      {{"POST", "/api/v1/plans", RouteAuth::kUser, {}}, &PreviewPlan},
      {{"GET", "/api/v1/entrypoints", RouteAuth::kUser, {}}, &ListEntrypoints},
      {{"POST", "/api/v1/entrypoints", RouteAuth::kUser, {}}, &AllowEntrypoint},
      {{"DELETE", "/api/v1/entrypoints/{name}", RouteAuth::kUser, {}}, &DisallowEntrypoint},
      {{"POST", "/api/v1/agent/enroll", RouteAuth::kJoin, {}}, &EnrolNode},
      {{"GET", "/api/v1/agent/join-bundle", RouteAuth::kUser, {}}, &JoinBundle},
      {{"POST", "/api/v1/agent/heartbeat", RouteAuth::kAgent, {}}, nullptr, &AgentHeartbeat},
  };
  return kRoutes;
}

// Matches a raw request path against a pattern; fills decoded placeholders.
// Returns false on no match; a placeholder that does not decode matches and
// leaves *bad_escape set.
bool Match(std::string_view pattern, std::string_view path, std::vector<std::string>* params,
           bool* bad_escape) {
  auto want = SplitPath(pattern);
  auto got = SplitPath(path);
  if (want.size() != got.size()) return false;
  params->clear();
  for (size_t i = 0; i < want.size(); ++i) {
    if (!want[i].empty() && want[i].front() == '{') {
      if (got[i].empty()) return false;
      auto decoded = PercentDecode(got[i], /*plus_is_space=*/false);
      if (!decoded) {
        *bad_escape = true;
        params->emplace_back();
      } else {
        params->push_back(std::move(*decoded));
      }
    } else if (want[i] != got[i]) {
      return false;
    }
  }
  return true;
}

// Extracts the token of "Authorization: Bearer <token>"; empty if absent.
std::string_view BearerToken(const Request& req) {
  std::string_view h = req.Header("authorization");
  constexpr std::string_view kScheme = "bearer ";
  if (h.size() <= kScheme.size()) return {};
  for (size_t i = 0; i < kScheme.size(); ++i) {
    char c = h[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != kScheme[i]) return {};
  }
  std::string_view token = h.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
  return token;
}

Response Unauthorized(std::string message) {
  Response r = ErrorResponse(Unauthenticated(std::move(message)));
  r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"tessera\"");
  return r;
}

// The answer to a credential the control plane did not accept: 401 with the
// challenge when it is wrong, else the control plane's error as it is.
Response AuthenticationFailed(const Status& st) {
  if (st.code() == StatusCode::kUnauthenticated) return Unauthorized(st.message());
  return ErrorResponse(st);
}

// 405 (an invalid_argument body) with the methods the path allows.
Response MethodNotAllowed(std::string message, std::string allow) {
  Response r = ErrorResponse(Status(StatusCode::kInvalidArgument, std::move(message)));
  r.status = 405;
  r.headers.emplace_back("Allow", std::move(allow));
  return r;
}

std::string MethodLabel(std::string_view method) {
  for (std::string_view m : {"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"}) {
    if (method == m) return std::string(m);
  }
  return "other";
}

// The answer, or nullopt when an async route took `done` to answer later.
std::optional<Response> Dispatch(const Request& req, ControlPlane& cp, const RouterOptions& options,
                                 HttpMetrics* metrics, std::string* route_label,
                                 const Responder& done) {
  Result<Target> parsed = ParseTarget(req.target);
  std::string_view raw_path = std::string_view(req.target).substr(0, req.target.find('?'));
  if (raw_path.empty() || raw_path.front() != '/') {
    *route_label = "unmatched";
    return ErrorResponse(InvalidArgument("request target must start with '/'", "path"));
  }

  const Route* found = nullptr;
  std::vector<std::string> params;
  bool bad_escape = false;
  std::string allow;
  for (const Route& r : Routes()) {
    std::vector<std::string> p;
    bool bad = false;
    if (!Match(r.info.pattern, raw_path, &p, &bad)) continue;
    if (r.info.method == req.method) {
      found = &r;
      params = std::move(p);
      bad_escape = bad;
      break;
    }
    if (!allow.empty()) allow += ", ";
    allow += r.info.method;
    *route_label = std::string(r.info.pattern);
  }

  if (found == nullptr) {
    if (!allow.empty()) {
      return MethodNotAllowed(
          "method " + MethodLabel(req.method) + " is not allowed; allowed: " + allow, allow);
    }
    if (raw_path.starts_with("/api/") || raw_path == "/api" || options.static_dir.empty()) {
      *route_label = "unmatched";
      return ErrorResponse(NotFound("no route for " + std::string(raw_path.substr(0, 256))));
    }
    *route_label = "static";
    if (req.method != "GET") {
      return MethodNotAllowed("only GET is allowed for web UI files", "GET");
    }
    Result<StaticFile> file = ReadStaticFile(options.static_dir, raw_path);
    if (!file.ok()) return ErrorResponse(file.status());
    Response r = TextResponse(200, std::move(file->body), file->content_type);
    r.headers.emplace_back("X-Content-Type-Options", "nosniff");
    r.headers.emplace_back("Cache-Control", "no-cache");
    return r;
  }

  *route_label = std::string(found->info.pattern);
  Call call{req, cp, options, metrics, parsed.ok() ? *parsed : Target{}, std::move(params), {}};

  switch (found->info.auth) {
    case RouteAuth::kNone:
      break;
    case RouteAuth::kUser: {
      std::string_view token = BearerToken(req);
      if (token.empty()) return Unauthorized("missing \"Authorization: Bearer <token>\" header");
      Result<Principal> who = cp.Authenticate(token);
      if (!who.ok()) return AuthenticationFailed(who.status());
      call.who = *std::move(who);
      break;
    }
    case RouteAuth::kLease:
      if (BearerToken(req).empty()) {
        return Unauthorized("missing \"Authorization: Bearer <lease token>\"");
      }
      break;
    case RouteAuth::kAgent: {
      std::string_view token = BearerToken(req);
      if (token.empty()) {
        return Unauthorized("missing \"Authorization: Bearer <node credential>\"");
      }
      Result<std::string> node = cp.AuthenticateNode(token);
      if (!node.ok()) return AuthenticationFailed(node.status());
      call.node = *std::move(node);
      break;
    }
    case RouteAuth::kJoin: {
      std::string_view token = BearerToken(req);
      if (token.empty()) return Unauthorized("missing \"Authorization: Bearer <join token>\"");
      Status st = cp.AuthenticateAgent(token);
      if (!st.ok()) return AuthenticationFailed(st);
      break;
    }
  }

  if (!parsed.ok()) return ErrorResponse(parsed.status());
  if (bad_escape) return ErrorResponse(InvalidArgument("malformed percent-encoding", "path"));
  for (const auto& [name, value] : parsed->query) {
    bool known = false;
    for (std::string_view allowed : found->info.query_params) known = known || name == allowed;
    if (!known) return ErrorResponse(InvalidArgument("unknown query parameter", name));
  }
  if (found->async_fn != nullptr) {
    found->async_fn(call, done);
    return std::nullopt;
  }
  return found->fn(call);
}

}  // namespace

std::string_view Request::Header(std::string_view lower_name) const {
  auto it = headers.find(std::string(lower_name));
  return it == headers.end() ? std::string_view() : std::string_view(it->second);
}

std::string_view Response::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return {};
}

Response ErrorResponse(const Status& status) {
  Status st = status.ok() ? Internal("an error response was built from an OK status") : status;
  return JsonResponse(HttpStatusFor(st.code()), ErrorJson(st));
}

const std::vector<RouteInfo>& RouteTable() {
  static const std::vector<RouteInfo> kTable = [] {
    std::vector<RouteInfo> out;
    for (const Route& r : Routes()) out.push_back(r.info);
    return out;
  }();
  return kTable;
}

void HandleAsync(const Request& request, ControlPlane& control_plane, const RouterOptions& options,
                 HttpMetrics* metrics, Responder done) {
  const Clock* clock = options.clock != nullptr ? options.clock : SystemClock::Default();
  const auto start = clock->SteadyNow();
  // Written by Dispatch before any answer can be sent.
  auto route_label = std::make_shared<std::string>("unmatched");
  Responder recorded = done.Then([clock, start, route_label, metrics,
                                  method = MethodLabel(request.method)](Response response) {
    if (metrics != nullptr) {
      std::chrono::duration<double> elapsed = clock->SteadyNow() - start;
      try {
        metrics->Record(*route_label, method, response.status, elapsed.count());
      } catch (...) {
        // Out of memory while recording a metric: the answer still goes out.
      }
    }
    return response;
  });
  std::optional<Response> response;
  try {
    response = Dispatch(request, control_plane, options, metrics, route_label.get(), recorded);
  } catch (const std::exception& e) {
    response = ErrorResponse(Internal(std::string("unexpected error: ") + e.what()));
  } catch (...) {
    response = ErrorResponse(Internal("unexpected error"));
  }
  // An async route that threw after answering keeps its answer (first wins).
  if (response) recorded.Send(*std::move(response));
}

Response Handle(const Request& request, ControlPlane& control_plane, const RouterOptions& options,
                HttpMetrics* metrics) {
  auto answer = std::make_shared<std::promise<Response>>();
  std::future<Response> future = answer->get_future();
  HandleAsync(request, control_plane, options, metrics,
              Responder([answer](Response r) { answer->set_value(std::move(r)); }));
  return future.get();
}

void Router::HandleAsync(const Request& request, Responder done) {
  api::HandleAsync(request, control_plane_, options_, &metrics_, std::move(done));
}

}  // namespace tessera::api
