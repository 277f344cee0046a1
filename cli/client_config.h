// Where the tessera CLI finds its server and token.
//
// Each setting comes from the first of: a command-line flag (--server,
// --token, --timeout), the environment (TESSERA_SERVER, TESSERA_TOKEN), the
// config file (--config PATH, else $XDG_CONFIG_HOME/tessera/cli.yaml, else
// ~/.config/tessera/cli.yaml), the default (http://127.0.0.1:8080).
//
// cli.yaml:
//   server: http://boxA:8080
//   token: tsk_...
//   timeout_s: 10
//
// Thread safety: pure functions (ResolveClientConfig reads one file).
#ifndef TESSERA_CLI_CLIENT_CONFIG_H_
#define TESSERA_CLI_CLIENT_CONFIG_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "common/status.h"

namespace tessera::cli {

struct ClientConfig {
  std::string server = "http://127.0.0.1:8080";
  std::string token;
  std::chrono::milliseconds timeout{10'000};
};

// What the command line said; unset fields fall through.
struct ClientFlags {
  std::optional<std::string> server;
  std::optional<std::string> token;
  std::optional<double> timeout_s;
  std::optional<std::string> config_path;  // an explicit --config must exist
};

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
// The process environment.
std::optional<std::string> ProcessEnv(const std::string& name);

Result<ClientConfig> ResolveClientConfig(const ClientFlags& flags, const EnvLookup& env);

struct ServerAddress {
  std::string host;
  uint16_t port = 8080;
};
// Parses "http://host:port", "http://host" (port 80), "host:port" or
// "http://[::1]:8080". https is refused: tesserad speaks plain HTTP (put a
// TLS proxy in front); kInvalidArgument naming "server".
Result<ServerAddress> ParseServerUrl(const std::string& url);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_CLIENT_CONFIG_H_
