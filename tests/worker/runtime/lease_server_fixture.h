// A tiny controller for tests: the lease route of api/lease_protocol.h on a
// real loopback HTTP server, backed by a MemoryChunkQueue. It checks the
// bearer token, the job id in the path and the attempt, and can be told to
// answer 503 a number of times (a controller restarting).
#ifndef TESSERA_TESTS_WORKER_RUNTIME_LEASE_SERVER_FIXTURE_H_
#define TESSERA_TESTS_WORKER_RUNTIME_LEASE_SERVER_FIXTURE_H_

#include <atomic>
#include <memory>
#include <string>

#include "api/http_server.h"
#include "api/lease_protocol.h"
#include "worker/runtime/chunk_source.h"

namespace tessera::worker::testing {

class LeaseServer {
 public:
  LeaseServer(std::shared_ptr<MemoryChunkQueue> queue, std::string token, std::string job,
              int64_t attempt)
      : queue_(std::move(queue)),
        token_(std::move(token)),
        job_(std::move(job)),
        attempt_(attempt),
        server_(api::HttpServerOptions{}, [this](const api::Request& r) { return Handle(r); }) {}

  Status Start() { return server_.Start(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }
  void FailNext(int n) { fail_next_ = n; }
  int requests() const { return requests_.load(); }

 private:
  static api::Response Json(int status, const api::Json& body) {
    api::Response r;
    r.status = status;
    r.body = body.dump();
    return r;
  }
  static api::Response Error(int status, const std::string& code, const std::string& msg) {
    return Json(status, {{"error", {{"code", code}, {"message", msg}}}});
  }

  api::Response Handle(const api::Request& r) {
    ++requests_;
    if (fail_next_.load() > 0) {
      --fail_next_;
      return Error(503, "unavailable", "controller restarting");
    }
    if (r.method != "POST" || r.target != "/api/v1/jobs/" + job_ + "/leases") {
      return Error(404, "not_found", "no route " + r.method + " " + r.target);
    }
    if (std::string(r.Header("authorization")) != "Bearer " + token_) {
      return Error(401, "unauthenticated", "bad lease token");
    }
    api::Json body;
    try {
      body = api::Json::parse(r.body);
    } catch (const std::exception&) {
      return Error(400, "invalid_argument", "not JSON");
    }
    auto req = api::LeaseRequestFromJson(body);
    if (!req.ok()) return Error(400, "invalid_argument", req.status().ToString());
    if (req->attempt != attempt_) return Error(409, "failed_precondition", "attempt is over");
    auto answer = queue_->Lease(req->rank, req->completed, req->max_chunks);
    if (!answer.ok()) return Error(400, "invalid_argument", answer.status().ToString());
    return Json(200, api::ToJson(*answer));
  }

  std::shared_ptr<MemoryChunkQueue> queue_;
  std::string token_;
  std::string job_;
  int64_t attempt_;
  std::atomic<int> fail_next_{0};
  std::atomic<int> requests_{0};
  api::HttpServer server_;
};

}  // namespace tessera::worker::testing

#endif  // TESSERA_TESTS_WORKER_RUNTIME_LEASE_SERVER_FIXTURE_H_
