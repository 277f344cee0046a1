// Internal to api/: the Boost.Asio SSL context of HttpServer
// (api/tls_context.h has the settings). Not included by other modules, so
// Boost stays out of their builds. Part of tessera_http_server.
//
// Thread safety: a context is built once and then only read (OpenSSL's
// SSL_CTX is safe to share between connections after setup).
#ifndef TESSERA_API_TLS_ASIO_SERVER_H_
#define TESSERA_API_TLS_ASIO_SERVER_H_

#include <boost/asio/ssl.hpp>
#include <memory>

#include "api/tls_context.h"
#include "common/status.h"

namespace tessera::api {

// A server context (TLS 1.2+) with the chain and key. Errors name
// "tls_cert_file" / "tls_key_file".
Result<std::shared_ptr<boost::asio::ssl::context>> MakeServerSslContext(
    const TlsServerFiles& files);

}  // namespace tessera::api

#endif  // TESSERA_API_TLS_ASIO_SERVER_H_
