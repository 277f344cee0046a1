// The REST routes of tesserad as plain functions: a Request in, a Response
// out, no sockets. HttpServer (api/http_server.h) feeds it parsed requests;
// tests and fuzzers call it directly.
//
// Most routes answer at once. The agent heartbeat may be answered later (a
// long poll, ControlPlane::HeartbeatAsync): HandleAsync hands such a route a
// Responder (api/responder.h) and returns without waiting; Handle waits for
// the answer, for callers that have a thread to spare (tests, fuzzers).
//
// Every route under /api/v1 needs "Authorization: Bearer <token>" checked
// with ControlPlane::Authenticate (401 otherwise); the agent heartbeat takes
// the node's own credential (ControlPlane::AuthenticateNode) and is refused
// (403) when it names another node; the cluster join token only enrols a
// node (POST /api/v1/agent/enroll, ControlPlane::AuthenticateAgent).
// /healthz, /readyz and /metrics are open (see docs/rest-api.md for why).
// Other GET paths serve the web UI from RouterOptions::static_dir.
//
// Errors are JSON: {"error":{"code","message","field"}}, with the HTTP status
// from HttpStatusFor (api/http_status.h). Bad input always gets a 4xx naming
// the field or query parameter; Handle never throws (an exception from the
// ControlPlane becomes a 500 "internal").
//
// Thread safety: Handle may be called from many threads at once, provided
// the ControlPlane is thread-safe (its contract says it is).
#ifndef TESSERA_API_ROUTER_H_
#define TESSERA_API_ROUTER_H_

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/control_plane.h"
#include "api/http_metrics.h"
#include "common/clock.h"

namespace tessera::api {

struct Request {
  std::string method;                          // "GET", "POST", ...
  std::string target;                          // path and query: "/api/v1/jobs?limit=5"
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string remote_address;  // for logs; may be empty

  // Value of a header (name in lower case), or "" when absent.
  std::string_view Header(std::string_view lower_name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // Extra headers (Location, Allow, WWW-Authenticate, ...).
  std::vector<std::pair<std::string, std::string>> headers;

  // The value of an extra header (case-sensitive name), or "".
  std::string_view Header(std::string_view name) const;
};

// A JSON error response for a non-OK Status.
Response ErrorResponse(const Status& status);

// kLease: a rank's chunk lease token; the route hands it to the control
// plane, which checks it against the job and attempt in the body.
// kAgent: a node's own credential (ControlPlane::AuthenticateNode); the
// route learns which node it is. kJoin: the cluster's join token
// (ControlPlane::AuthenticateAgent), which only enrols nodes.
enum class RouteAuth { kNone, kUser, kAgent, kLease, kJoin };

// One entry of the route table; docs/rest-api.md and api/openapi.yaml list
// the same routes (a test keeps openapi.yaml in step with this table).
struct RouteInfo {
  std::string_view method;   // "GET", "POST", "DELETE"
  std::string_view pattern;  // "/api/v1/jobs/{id}"
  RouteAuth auth;
  std::vector<std::string_view> query_params;  // allowed query parameters
};
const std::vector<RouteInfo>& RouteTable();

struct RouterOptions {
  // Directory of the web UI served at "/"; empty: no static files (404).
  std::string static_dir;
  // Used to time requests for the latency histogram. Not owned; must
  // outlive the router.
  const Clock* clock = SystemClock::Default();
};

class Responder;

// Handles one request and sends its answer through `done`: before returning
// for every route but a parked heartbeat, whose answer comes later from the
// thread that completes it. metrics may be null (nothing recorded, and
// /metrics shows only the ControlPlane's lines). REQUIRES: control_plane,
// options and metrics outlive the answer.
void HandleAsync(const Request& request, ControlPlane& control_plane, const RouterOptions& options,
                 HttpMetrics* metrics, Responder done);

// HandleAsync, waiting for the answer (a parked heartbeat blocks the caller
// until it is answered).
Response Handle(const Request& request, ControlPlane& control_plane, const RouterOptions& options,
                HttpMetrics* metrics);

// Router: Handle bound to a ControlPlane, options and its own metrics.
// REQUIRES: control_plane outlives the router.
class Router {
 public:
  Router(ControlPlane& control_plane, RouterOptions options)
      : control_plane_(control_plane), options_(std::move(options)) {}

  Response Handle(const Request& request) {
    return api::Handle(request, control_plane_, options_, &metrics_);
  }
  void HandleAsync(const Request& request, Responder done);
  HttpMetrics& metrics() { return metrics_; }

 private:
  ControlPlane& control_plane_;
  RouterOptions options_;
  HttpMetrics metrics_;
};

}  // namespace tessera::api

#endif  // TESSERA_API_ROUTER_H_
