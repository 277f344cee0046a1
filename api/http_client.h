// HttpClient: a small synchronous HTTP/1.1 client (Boost.Beast) used by the
// CLI, the agent and the tests to talk to tesserad.
//
// One instance keeps one keep-alive connection and reconnects when the
// server closed it. Every call has a deadline; a network failure is returned
// as kUnavailable / kDeadlineExceeded, never thrown.
//
// HTTPS: built from an https:// ServerUrl, the client speaks TLS 1.2+ and
// verifies the server as TlsClientOptions says (api/tls_context.h: a pinned
// SHA-256 fingerprint, a CA file, or the system's trust store). A server
// that fails verification gets no request at all: the call returns
// kUnavailable saying why the certificate was refused.
//
// Thread safety: not thread-safe; use one client per thread.
#ifndef TESSERA_API_HTTP_CLIENT_H_
#define TESSERA_API_HTTP_CLIENT_H_

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "api/server_url.h"
#include "api/tls_context.h"
#include "common/status.h"

namespace tessera::api {

struct HttpResponse {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
};

class HttpClient {
 public:
  // Plain HTTP. host: "127.0.0.1" or a name; port: TCP port.
  HttpClient(std::string host, uint16_t port,
             std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // HTTP or HTTPS as url says; url.path_prefix is put before every target.
  // A bad TLS setting (unreadable CA file, malformed fingerprint) is
  // returned by every Request.
  HttpClient(const ServerUrl& url, std::chrono::milliseconds timeout, TlsClientOptions tls = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sets "Authorization: Bearer <token>" on every following request.
  void SetBearerToken(std::string token);

  // Sets header `name: value` on every following request (an empty value
  // removes it), e.g. slurmrestd's X-SLURM-USER-TOKEN.
  void SetHeader(std::string name, std::string value);

  // method: "GET", "POST", "DELETE", ...; target: "/api/v1/jobs?state=pending".
  // An HTTP error status (4xx/5xx) is a successful Result; only transport
  // failures are errors.
  Result<HttpResponse> Request(const std::string& method, const std::string& target,
                               const std::string& body = {},
                               const std::string& content_type = "application/json");

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::api

#endif  // TESSERA_API_HTTP_CLIENT_H_
