// Internal to api/: the Boost.Asio SSL context of HttpClient
// (api/tls_context.h has the settings) and the pinned-fingerprint verifier.
// Not included by other modules, so Boost stays out of their builds. Part of
// tessera_http_client.
//
// Thread safety: a context is built once and then only read (OpenSSL's
// SSL_CTX is safe to share between connections after setup).
#ifndef TESSERA_API_TLS_ASIO_CLIENT_H_
#define TESSERA_API_TLS_ASIO_CLIENT_H_

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

}  // namespace tessera::api

#endif  // TESSERA_API_TLS_ASIO_CLIENT_H_
