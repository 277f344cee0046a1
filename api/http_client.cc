#include "api/http_client.h"

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <optional>

#include "api/beast_aliases.h"
#include "api/http_fields.h"
#include "api/http_stream.h"
#include "api/tls_asio_client.h"

namespace tessera::api {
namespace {

constexpr size_t kMaxResponseBody = 256u * 1024 * 1024;

bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
}

bool IsSafeTarget(std::string_view s) {
  if (s.empty() || s.front() != '/') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u > 0x20 && u != 0x7f;
  });
}

bool IsSafeHeaderValue(std::string_view s) {
  return std::none_of(s.begin(), s.end(),
                      [](char c) { return c == '\r' || c == '\n' || c == '\0'; });
}

// Errors meaning "the server had closed this keep-alive connection": the
// request was not processed, so sending it again on a new connection is safe.
bool IsStaleConnection(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == net::error::eof ||
         ec == net::error::connection_reset || ec == net::error::broken_pipe ||
         ec == net::error::connection_aborted || ec == net::ssl::error::stream_truncated;
}

// Why a TLS handshake failed, with the certificate check's verdict.
std::string HandshakeFailure(SSL* ssl, const beast::error_code& ec) {
  const long verify = SSL_get_verify_result(ssl);  // NOLINT(runtime/int): OpenSSL's type
  if (verify != X509_V_OK) {
    return std::string("the server's certificate was refused: ") +
           X509_verify_cert_error_string(verify);
  }
  return ec.message();
}

}  // namespace

struct HttpClient::Impl {
  std::string host;
  uint16_t port = 0;
  std::chrono::milliseconds timeout;
  std::string token;
  std::map<std::string, std::string> headers;  // SetHeader
  net::io_context ioc{1};
  // HTTPS: the connection is conn.tls (wrapping the TCP stream), else conn.plain.
  HttpStream conn;
  bool use_tls = false;
  TlsClientOptions tls;
  std::shared_ptr<net::ssl::context> tls_context;
  Status setup_error;  // a bad TLS setting, returned by every Request
  std::string path_prefix;
  beast::flat_buffer buffer;

  std::string Where() const { return host + ":" + std::to_string(port); }

  Status TransportError(std::string_view what, const beast::error_code& ec) const {
    std::string msg = std::string(what) + " " + Where() + ": " + ec.message();
    if (ec == beast::error::timeout) return DeadlineExceeded(std::move(msg));
    return Unavailable(std::move(msg));
  }

  void Close() {
    if (conn.open()) conn.CloseSocket();
    conn.tls.reset();
    conn.plain.reset();
    buffer.clear();
  }

  // Runs the io_context until the started operation completes.
  void RunAll() {
    ioc.restart();
    ioc.run();
  }

  Status Connect(std::chrono::steady_clock::time_point deadline) {
    Close();
    tcp::resolver resolver(ioc);
    beast::error_code ec;
    tcp::resolver::results_type endpoints;
    bool done = false;
    resolver.async_resolve(host, std::to_string(port),
                           [&](beast::error_code e, tcp::resolver::results_type r) {
                             ec = e;
                             endpoints = std::move(r);
                             done = true;
                           });
    ioc.restart();
    ioc.run_until(deadline);
    if (!done) {
      resolver.cancel();
      RunAll();
      return DeadlineExceeded("resolve " + Where() + ": timed out");
    }
    if (ec) return TransportError("resolve", ec);
    conn.plain.emplace(ioc);
    conn.plain->expires_at(deadline);
    conn.plain->async_connect(endpoints,
                              [&](beast::error_code e, const tcp::endpoint&) { ec = e; });
    RunAll();
    if (ec) {
      Close();
      return TransportError("connect to", ec);
    }
    beast::error_code ignored;
    conn.plain->socket().set_option(tcp::no_delay(true), ignored);
    if (!use_tls) return Status::Ok();
    conn.tls.emplace(std::move(*conn.plain), *tls_context);
    conn.plain.reset();
    Status prepared = PrepareClientSsl(conn.tls->native_handle(), host, tls);
    if (!prepared.ok()) {
      Close();
      return prepared;
    }
    conn.tcp().expires_at(deadline);
    conn.tls->async_handshake(net::ssl::stream_base::client, [&](beast::error_code e) { ec = e; });
    RunAll();
    if (ec) {
      std::string why = HandshakeFailure(conn.tls->native_handle(), ec);
      Close();
      if (ec == beast::error::timeout) return DeadlineExceeded("TLS handshake with " + Where());
      return Unavailable("TLS handshake with " + Where() + ": " + why);
    }
    return Status::Ok();
  }

  // One request/response on the current connection. *stale is set when the
  // failure shows the server had already closed the connection.
  Result<HttpResponse> RoundTrip(const http::request<http::string_body>& req,
                                 std::chrono::steady_clock::time_point deadline, bool* stale) {
    beast::error_code ec;
    conn.tcp().expires_at(deadline);
    conn.Visit(
        [&](auto& s) { http::async_write(s, req, [&](beast::error_code e, size_t) { ec = e; }); });
    RunAll();
    beast::error_code write_ec = ec;
    if (write_ec && !IsStaleConnection(write_ec)) return TransportError("send to", write_ec);
    // When the write failed because the server closed early, it may still
    // have answered first (413 for a body over its limit): read that answer.
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxResponseBody);
    if (req.method() == http::verb::head) parser.skip(true);
    conn.tcp().expires_at(deadline);
    size_t got = 0;
    conn.Visit([&](auto& s) {
      http::async_read(s, buffer, parser, [&](beast::error_code e, size_t n) {
        ec = e;
        got = n;
      });
    });
    RunAll();
    if (ec) {
      if (write_ec) {
        *stale = true;
        return TransportError("send to", write_ec);
      }
      *stale = got == 0 && IsStaleConnection(ec);
      return TransportError("read from", ec);
    }
    auto res = parser.release();
    HttpResponse out;
    out.status = static_cast<int>(res.result_int());
    out.body = std::move(res.body());
    out.headers = HeaderMap(res);
    if (!res.keep_alive() || write_ec) Close();
    return out;
  }
};

HttpClient::HttpClient(std::string host, uint16_t port, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->host = std::move(host);
  impl_->port = port;
  impl_->timeout = timeout;
}

HttpClient::HttpClient(const ServerUrl& url, std::chrono::milliseconds timeout,
                       TlsClientOptions tls)
    : HttpClient(url.host, url.port, timeout) {
  impl_->path_prefix = url.path_prefix;
  impl_->use_tls = url.tls;
  impl_->tls = std::move(tls);
  if (url.tls) {
    auto context = MakeClientSslContext(impl_->tls);
    if (context.ok()) {
      impl_->tls_context = *std::move(context);
    } else {
      impl_->setup_error = context.status();
    }
  }
}

HttpClient::~HttpClient() {
  try {
    impl_->Close();
  } catch (...) {
  }
}

void HttpClient::SetBearerToken(std::string token) { impl_->token = std::move(token); }

void HttpClient::SetHeader(std::string name, std::string value) {
  if (value.empty()) {
    impl_->headers.erase(name);
  } else {
    impl_->headers[std::move(name)] = std::move(value);
  }
}

Result<HttpResponse> HttpClient::Request(const std::string& method, const std::string& target,
                                         const std::string& body, const std::string& content_type) {
  if (!impl_->setup_error.ok()) return impl_->setup_error;
  if (!IsToken(method)) return InvalidArgument("must be an upper-case HTTP method", "method");
  if (!IsSafeTarget(target)) {
    return InvalidArgument("must start with '/' and contain no spaces or control bytes", "target");
  }
  if (!IsSafeHeaderValue(impl_->token)) return InvalidArgument("bad characters", "token");
  if (!IsSafeHeaderValue(content_type)) return InvalidArgument("bad characters", "content_type");
  for (const auto& [name, value] : impl_->headers) {
    if (!IsSafeHeaderValue(name) || !IsSafeHeaderValue(value) ||
        name.find(':') != std::string::npos)
      return InvalidArgument("bad characters", "header " + name);
  }
  try {
    http::request<http::string_body> req;
    req.method_string(method);
    req.target(impl_->path_prefix + target);
    req.version(11);
    req.set(http::field::host, impl_->host + ":" + std::to_string(impl_->port));
    req.set(http::field::user_agent, "tessera-client");
    if (!impl_->token.empty()) req.set(http::field::authorization, "Bearer " + impl_->token);
    if (!body.empty()) req.set(http::field::content_type, content_type);
    for (const auto& [name, value] : impl_->headers) req.set(name, value);
    req.body() = body;
    req.keep_alive(true);
    req.prepare_payload();

    auto deadline = std::chrono::steady_clock::now() + impl_->timeout;
    for (int attempt = 0;; ++attempt) {
      bool reused = impl_->conn.open();
      if (!reused) TESSERA_RETURN_IF_ERROR(impl_->Connect(deadline));
      bool stale = false;
      Result<HttpResponse> res = impl_->RoundTrip(req, deadline, &stale);
      if (res.ok()) return res;
      impl_->Close();
      if (!(reused && stale && attempt == 0)) return res;
      // The server closed the idle keep-alive connection: reconnect once.
    }
  } catch (const std::exception& e) {
    impl_->Close();
    return Internal(std::string("http client: ") + e.what());
  }
}

}  // namespace tessera::api
