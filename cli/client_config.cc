#include "cli/client_config.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "api/server_url.h"
#include "api/tls_context.h"

namespace tessera::cli {
namespace {

std::optional<std::string> DefaultConfigPath(const EnvLookup& env) {
  if (auto xdg = env("XDG_CONFIG_HOME"); xdg && !xdg->empty()) {
    return *xdg + "/tessera/cli.yaml";
  }
  if (auto home = env("HOME"); home && !home->empty()) {
    return *home + "/.config/tessera/cli.yaml";
  }
  return std::nullopt;
}

Status CheckTimeout(double seconds, const std::string& field) {
  if (!(seconds > 0) || seconds > 3600 || std::isnan(seconds)) {
    return InvalidArgument("must be between 0 and 3600 seconds", field);
  }
  return Status::Ok();
}

}  // namespace

std::optional<std::string> ProcessEnv(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

Result<ClientConfig> ResolveClientConfig(const ClientFlags& flags, const EnvLookup& env) {
  ClientConfig config;
  // 1. The config file (lowest precedence after the defaults).
  std::optional<std::string> path = flags.config_path;
  bool explicit_path = path.has_value();
  if (!path) path = DefaultConfigPath(env);
  std::error_code ec;
  if (path && (explicit_path || std::filesystem::exists(*path, ec))) {
    try {
      YAML::Node doc = YAML::LoadFile(*path);
      if (doc && !doc.IsNull()) {
        if (!doc.IsMap()) return InvalidArgument(*path + ": must be a YAML mapping", "config");
        for (const auto& kv : doc) {
          std::string key = kv.first.as<std::string>();
          if (key == "server") {
            config.server = kv.second.as<std::string>();
          } else if (key == "token") {
            config.token = kv.second.as<std::string>();
          } else if (key == "ca_file") {
            config.ca_file = kv.second.as<std::string>();
          } else if (key == "ca_sha256") {
            config.ca_sha256 = kv.second.as<std::string>();
          } else if (key == "timeout_s") {
            double t = kv.second.as<double>();
            TESSERA_RETURN_IF_ERROR(CheckTimeout(t, "timeout_s"));
            config.timeout = std::chrono::milliseconds(static_cast<int64_t>(t * 1000));
          } else {
            return InvalidArgument(*path + ": unknown key", key);
          }
        }
      }
    } catch (const YAML::Exception& e) {
      return InvalidArgument(*path + ": " + e.what(), "config");
    }
  }
  // 2. The environment.
  if (auto s = env("TESSERA_SERVER"); s && !s->empty()) config.server = *s;
  if (auto t = env("TESSERA_TOKEN"); t && !t->empty()) config.token = *t;
  if (auto c = env("TESSERA_CA_FILE"); c && !c->empty()) config.ca_file = *c;
  if (auto c = env("TESSERA_CA_SHA256"); c && !c->empty()) config.ca_sha256 = *c;
  // 3. Flags.
  if (flags.server) config.server = *flags.server;
  if (flags.token) config.token = *flags.token;
  if (flags.ca_file) config.ca_file = *flags.ca_file;
  if (flags.ca_sha256) config.ca_sha256 = *flags.ca_sha256;
  if (!config.ca_sha256.empty()) {
    TESSERA_ASSIGN_OR_RETURN(config.ca_sha256,
                             api::NormalizeSha256Fingerprint(config.ca_sha256, "ca_sha256"));
  }
  if (flags.timeout_s) {
    TESSERA_RETURN_IF_ERROR(CheckTimeout(*flags.timeout_s, "timeout"));
    config.timeout = std::chrono::milliseconds(static_cast<int64_t>(*flags.timeout_s * 1000));
  }
  TESSERA_RETURN_IF_ERROR(api::ParseServerUrl(config.server, "server").status());
  return config;
}

}  // namespace tessera::cli
