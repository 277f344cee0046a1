// HttpStream: the stream of one HTTP connection, plain TCP or TLS over TCP,
// as HttpClient and HttpServer's sessions hold it: the TCP layer for timeouts
// and closing, and the stream requests and answers travel on.
//
// For the .cc files of HttpClient and HttpServer only (Beast stays out of api/'s
// public headers). Ownership: owns the streams it holds. Thread safety: none;
// it is used as its connection is (one thread, or one strand, at a time).
#ifndef TESSERA_API_HTTP_STREAM_H_
#define TESSERA_API_HTTP_STREAM_H_

#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <optional>
#include <utility>

#include "api/beast_aliases.h"

namespace tessera::api {

struct HttpStream {
  // At most one is set: `tls` (wrapping its TCP stream) for HTTPS, else `plain`.
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls;

  bool open() const { return plain.has_value() || tls.has_value(); }

  // The TCP layer, under TLS or not. REQUIRES: open().
  beast::tcp_stream& tcp() { return tls ? beast::get_lowest_layer(*tls) : *plain; }

  // Runs op(stream) on the stream requests and answers travel on (the TLS
  // stream or the plain one). REQUIRES: open().
  template <typename Op>
  void Visit(Op&& op) {
    if (tls) {
      std::forward<Op>(op)(*tls);
    } else {
      std::forward<Op>(op)(*plain);
    }
  }

  // Shuts the TCP connection down both ways and closes it, errors ignored; the
  // streams stay set. REQUIRES: open().
  void CloseSocket() {
    beast::error_code ignored;
    tcp().socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
    tcp().close();
  }
};

}  // namespace tessera::api

#endif  // TESSERA_API_HTTP_STREAM_H_
