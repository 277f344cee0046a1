// ServerUrl: where a client (CLI, agent, worker) reaches tesserad.
//
// "http://host[:port][/prefix]" or "https://host[:port][/prefix]"; IPv6
// hosts in brackets ("https://[::1]:8443"). The port defaults to 80 / 443.
// Every error is kInvalidArgument naming the caller's field (e.g. "server",
// "controller", "TESSERA_CONTROLLER_URL").
//
// Thread safety: pure functions.
#ifndef TESSERA_API_SERVER_URL_H_
#define TESSERA_API_SERVER_URL_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tessera::api {

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
