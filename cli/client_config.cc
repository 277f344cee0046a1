#include "cli/client_config.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>

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
  TESSERA_RETURN_IF_ERROR(ParseServerUrl(config.server).status());
  return config;
}

Result<ServerAddress> ParseServerUrl(const std::string& url) {
  std::string_view rest = url;
  uint16_t default_port = 8080;
  bool tls = false;
  if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
    default_port = 443;
    tls = true;
  } else if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
    default_port = 80;
  }
  if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    if (rest.substr(slash) != "/") {
      return InvalidArgument("must be http(s)://host:port without a path", "server");
    }
    rest = rest.substr(0, slash);
  }
  ServerAddress out;
  out.port = default_port;
  out.tls = tls;
  std::string_view port_text;
  if (rest.starts_with("[")) {
    size_t close = rest.find(']');
    if (close == std::string_view::npos) return InvalidArgument("unclosed '['", "server");
    out.host = std::string(rest.substr(1, close - 1));
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return InvalidArgument("malformed address", "server");
      port_text = after.substr(1);
    }
  } else {
    size_t colon = rest.rfind(':');
    out.host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) port_text = rest.substr(colon + 1);
  }
  if (out.host.empty()) return InvalidArgument("has no host", "server");
  if (!port_text.empty() || rest.ends_with(":")) {
    unsigned value = 0;
    auto [ptr, err] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
    if (port_text.empty() || err != std::errc() || ptr != port_text.data() + port_text.size() ||
        value == 0 || value > 65535) {
      return InvalidArgument("port must be 1..65535", "server");
    }
    out.port = static_cast<uint16_t>(value);
  }
  return out;
}

}  // namespace tessera::cli
