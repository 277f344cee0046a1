// HttpServer: the HTTP/1.1 server of tesserad (Boost.Beast, asynchronous).
//
// Shaped like Beast's "advanced server" example: one listener accepts on a
// strand; each connection is a session whose operations all run on its own
// strand. A session reads requests with keep-alive, answers each by calling
// the handler, and may read ahead while earlier answers are still being
// written (pipelining), up to `pipeline_limit` queued answers; answers are
// always written in request order.
//
// Limits, with the answer each one gives:
//   - body over `body_limit` (default 1 MiB): 413 JSON, then the connection
//     is closed after the rest of the upload is drained for a moment, so
//     the client reads the answer instead of a reset;
//   - headers over `header_limit`: 413 JSON, then close;
//   - malformed HTTP: 400 JSON, then close (other connections carry on);
//   - no complete request within `idle_timeout` (idle keep-alive
//     connection, or a slow sender): the connection is closed;
//   - an answer not written within `idle_timeout`: the connection is closed.
//
// Stop() is graceful: it stops accepting, closes idle connections, lets
// requests being handled finish and their answers be written (marked
// "Connection: close") within `shutdown_grace`, then closes whatever is
// left and joins the io threads.
//
// Deferred answers: an AsyncHttpHandler gets a Responder (api/responder.h)
// with each request and may answer through it later, from any thread (an
// agent's long poll parked until there is news). Meanwhile the connection
// reads nothing more and no io thread is held; the answer is written on the
// connection's strand when it comes. Stop() waits for such answers within
// `shutdown_grace` like for any request being handled; answers that come
// after the connection closed are dropped.
//
// Thread safety: Start/Stop/port may be called from any one thread (not
// concurrently with each other). The handler is called from the io
// threads, for many connections at once: it must be thread-safe. It should
// not block for long: a handler call occupies one io thread (wait by
// keeping the Responder instead).
#ifndef TESSERA_API_HTTP_SERVER_H_
#define TESSERA_API_HTTP_SERVER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "api/responder.h"
#include "api/router.h"
#include "api/tls_context.h"
#include "common/status.h"

namespace tessera::api {

// Answers at once.
using HttpHandler = std::function<Response(const Request&)>;
// Answers through `done`, now or later (see above).
using AsyncHttpHandler = std::function<void(const Request&, Responder done)>;

struct HttpServerOptions {
  std::string address = "127.0.0.1";  // IPv4 or IPv6 literal; "0.0.0.0" for all
  uint16_t port = 0;                  // 0: an ephemeral port (see HttpServer::port())
  int io_threads = 2;
  std::chrono::milliseconds idle_timeout{30'000};
  size_t body_limit = 1024 * 1024;
  size_t header_limit = 16 * 1024;
  size_t pipeline_limit = 8;  // answers queued per connection before reading pauses
  std::chrono::milliseconds shutdown_grace{5'000};
  int listen_backlog = 128;
  std::string server_header = "tesserad";
  // HTTPS: every connection completes a TLS (1.2+) handshake with this
  // certificate chain and key before a request is read; a client speaking
  // plain HTTP, or failing the handshake within idle_timeout, is closed
  // unanswered. Unset: plain HTTP. A chain or key that does not load makes
  // Start() fail (kInvalidArgument naming "tls_cert_file" / "tls_key_file").
  std::optional<TlsServerFiles> tls;
  // Called once, on the thread calling Start(), after the socket is bound
  // and listening and before Start() returns (e.g. to sd_notify READY=1).
  std::function<void(uint16_t bound_port)> on_listening;
};

class HttpServer {
 public:
  // REQUIRES: handler is callable and thread-safe.
  HttpServer(HttpServerOptions options, HttpHandler handler);
  HttpServer(HttpServerOptions options, AsyncHttpHandler handler);
  // Calls Stop().
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, listens, starts the io threads. kUnavailable when the address
  // cannot be bound, kInvalidArgument for a bad address, kFailedPrecondition
  // when already started.
  Status Start();

  // Graceful stop (see above). Idempotent; also fine if never started.
  // Blocks for at most shutdown_grace + 1 s plus the longest running
  // handler call. REQUIRES: not called from inside the handler.
  void Stop();

  // The bound port (the ephemeral one when options.port was 0); 0 before
  // Start().
  uint16_t port() const;

  // Connections currently open.
  size_t open_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::api

#endif  // TESSERA_API_HTTP_SERVER_H_
