// Self-signed TLS for tesserad: its own CA and a server certificate signed
// by it, made in a folder (normally <state_dir>/tls) at first start.
//
// Files: ca.pem (the CA certificate clients trust or pin), ca.key (0600),
// server.pem (server certificate then CA: the chain served), server.key
// (0600). The CA (EC P-256, 10 years) is made once and kept, so the
// fingerprint in join bundles stays valid; the server certificate (EC P-256,
// 2 years, serverAuth) is issued again by that CA when it is missing,
// unreadable, expires within 30 days, or does not name every requested
// server name. Keys never leave the folder.
//
// Files are read and written through `files` (not owned); each is written
// atomically (common/atomic_file.h), so a crash leaves the old file or the
// new one, and a write that fails is returned (kUnavailable naming the file).
//
// Thread safety: call once at start (concurrent callers on one folder are
// not supported).
#ifndef TESSERA_DAEMON_SELF_SIGNED_CA_H_
#define TESSERA_DAEMON_SELF_SIGNED_CA_H_

#include <string>
#include <vector>

#include "api/tls_context.h"
#include "common/file_system.h"
#include "common/status.h"

namespace tessera::daemon {

struct SelfSignedTls {
  api::TlsServerFiles server;              // server.pem, server.key
  std::string ca_file;                     // ca.pem
  std::string ca_sha256;                   // SHA-256 of the CA certificate (64 lower-case hex)
  bool issued_server_certificate = false;  // this call made a new server certificate
  bool made_ca = false;                    // this call made a new CA
};

// server_names: DNS names and IP literals the server certificate names.
// REQUIRES: at least one name. kUnavailable when the folder cannot be
// written, kInternal for an OpenSSL failure.
Result<SelfSignedTls> EnsureSelfSignedTls(const std::string& dir,
                                          const std::vector<std::string>& server_names,
                                          FileSystem* files = FileSystem::Default());

// The names tesserad's own certificate carries by default: the host name,
// "localhost", "127.0.0.1", "::1", the listen address unless it is a
// wildcard, then `extra`, without duplicates.
std::vector<std::string> DefaultServerNames(const std::string& listen_address,
                                            const std::vector<std::string>& extra);

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_SELF_SIGNED_CA_H_
