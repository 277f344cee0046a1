// Internal to api/: Boost.Asio SSL contexts for HttpServer and HttpClient
// (api/tls_context.h has the settings). Not included by other modules, so
// Boost stays out of their builds.
//
// Thread safety: a context is built once and then only read (OpenSSL's
// SSL_CTX is safe to share between connections after setup).
#ifndef TESSERA_API_TLS_ASIO_H_
#define TESSERA_API_TLS_ASIO_H_

#include <boost/asio/ssl.hpp>
#include <memory>
#include <string>

#include "api/tls_context.h"
#include "common/status.h"

namespace tessera::api {

// A client context verifying as TlsClientOptions says. The pinned
// fingerprint (if any) lives in the returned object's ex-data and must not
// outlive it.
Result<std::shared_ptr<boost::asio::ssl::context>> MakeClientSslContext(
    const TlsClientOptions& options);

// Per connection: SNI and (unless pinned) the host name or IP to check.
// REQUIRES: ssl belongs to a context from MakeClientSslContext(options).
Status PrepareClientSsl(SSL* ssl, const std::string& host, const TlsClientOptions& options);

// A server context (TLS 1.2+) with the chain and key. Errors name
// "tls_cert_file" / "tls_key_file".
Result<std::shared_ptr<boost::asio::ssl::context>> MakeServerSslContext(
    const TlsServerFiles& files);

}  // namespace tessera::api

#endif  // TESSERA_API_TLS_ASIO_H_
