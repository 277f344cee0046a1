// ServerUrl: where a client (CLI, agent, worker) reaches tesserad. The one
// parser of a controller address: the CLI's --server, the agent's
// --controller, a join bundle's controller and a rank's
// TESSERA_CONTROLLER_URL all go through ParseServerUrl, so they accept the
// same text.
//
// Accepted:
//   http://host[:port][/prefix]    port 80 when absent
//   https://host[:port][/prefix]   port 443 when absent
//   host[:port]                    a bare host: plain HTTP, port 8080
//                                  (tesserad's default) when absent
// IPv6 hosts go in brackets ("https://[::1]:8443", "[::1]:8080"). A path
// prefix is accepted only when the caller allows one; a trailing '/' is
// always fine. Rejected, each kInvalidArgument naming the caller's field
// (e.g. "server", "controller", "TESSERA_CONTROLLER_URL"): another scheme,
// an empty host, user information ("user@host"), a port that is empty, not a
// number or outside 1..65535, an unbracketed ':' in the host, control
// characters, spaces, '?' or '#'.
//
// Thread safety: pure functions.
#ifndef TESSERA_API_SERVER_URL_H_
#define TESSERA_API_SERVER_URL_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tessera::api {

// The port of a bare host without one (tesserad listens there by default).
inline constexpr uint16_t kDefaultServerPort = 8080;

struct ServerUrl {
  bool tls = false;  // https
  std::string host;  // without brackets
  uint16_t port = 80;
  std::string path_prefix;  // "" or "/prefix" without a trailing '/'
};

// allow_path: whether a path prefix is accepted (else only "/" may follow
// the authority).
Result<ServerUrl> ParseServerUrl(std::string_view url, const std::string& field,
                                 bool allow_path = false);

// Whether host is a loopback address or "localhost" (127.0.0.0/8, ::1).
bool IsLoopbackHost(std::string_view host);

}  // namespace tessera::api

#endif  // TESSERA_API_SERVER_URL_H_
