// TLS settings shared by tesserad's server and its clients (CLI, agent,
// worker), without Boost or OpenSSL types (those stay in api/tls_asio.h).
//
// A client verifies tesserad in one of three ways:
//   - ca_sha256: a pinned SHA-256 fingerprint (the join bundle's): the
//     server's chain must verify up to a certificate with that fingerprint
//     (normally tesserad's own CA); the host name is not checked, since the
//     pin names this cluster's CA alone;
//   - ca_file: a PEM file of CA certificates; the chain must verify up to
//     one of them and the server certificate must name the host (DNS name
//     or IP address) the client dialled;
//   - neither: the system's trust store, with the host name checked.
//
// Thread safety: plain values and pure functions.
#ifndef TESSERA_API_TLS_CONTEXT_H_
#define TESSERA_API_TLS_CONTEXT_H_

#include <string>
#include <string_view>

#include "common/status.h"

namespace tessera::api {

struct TlsClientOptions {
  std::string ca_file;
  std::string ca_sha256;  // any form NormalizeSha256Fingerprint accepts
};

// The server's certificate chain (leaf first, PEM) and its private key.
struct TlsServerFiles {
  std::string cert_file;
  std::string key_file;
};

// "AB:CD:...", "abcd...", "sha256:AB:CD..." (64 hex digits, colons
// optional) to 64 lower-case hex digits. kInvalidArgument naming `field`.
Result<std::string> NormalizeSha256Fingerprint(std::string_view text, const std::string& field);

// "AB:CD:..." (upper-case, colon-separated) from 64 hex digits, as
// `openssl x509 -fingerprint -sha256` prints it.
std::string DisplayFingerprint(std::string_view hex);

// SHA-256 fingerprint (64 lower-case hex digits) of the DER encoding of the
// first certificate in a PEM file or PEM text.
Result<std::string> CertificateFileSha256(const std::string& pem_path);
Result<std::string> CertificatePemSha256(std::string_view pem);

// Checks that a certificate chain and key load and match (what the server
// will do at start), so a bad configuration is refused with a clear error
// naming "tls_cert_file" / "tls_key_file".
Status CheckTlsServerFiles(const TlsServerFiles& files);

}  // namespace tessera::api

#endif  // TESSERA_API_TLS_CONTEXT_H_
