// Where the tessera CLI finds its server and token.
//
// Each setting comes from the first of: a command-line flag (--server,
// --token, --timeout), the environment (TESSERA_SERVER, TESSERA_TOKEN), the
// config file (--config PATH, else $XDG_CONFIG_HOME/tessera/cli.yaml, else
// ~/.config/tessera/cli.yaml), the default (http://127.0.0.1:8080).
// The server is parsed by api::ParseServerUrl (api/server_url.h), as every
// client parses tesserad's address: http(s)://host[:port], or a bare
// host[:port] (plain HTTP, port 8080); errors name "server".
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
  // How an https:// server is verified (api/tls_context.h): a pinned
  // SHA-256 fingerprint (the join bundle's), a CA file, or neither (the
  // system's trust store). Keys ca_sha256 / ca_file, env TESSERA_CA_SHA256 /
  // TESSERA_CA_FILE, flags --ca-sha256 / --ca-file.
  std::string ca_file;
  std::string ca_sha256;
  std::chrono::milliseconds timeout{10'000};
};

// What the command line said; unset fields fall through.
struct ClientFlags {
  std::optional<std::string> server;
  std::optional<std::string> token;
  std::optional<double> timeout_s;
  std::optional<std::string> ca_file;
  std::optional<std::string> ca_sha256;
  std::optional<std::string> config_path;  // an explicit --config must exist
};

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
// The process environment.
std::optional<std::string> ProcessEnv(const std::string& name);

Result<ClientConfig> ResolveClientConfig(const ClientFlags& flags, const EnvLookup& env);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_CLIENT_CONFIG_H_
