#include "api/server_url.h"

#include <arpa/inet.h>

#include <optional>

#include "common/quantities.h"

namespace tessera::api {
namespace {

bool IsBadHostChar(char c) {
  return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '/' || c == '?' || c == '#';
}

}  // namespace

Result<ServerUrl> ParseServerUrl(std::string_view url, const std::string& field, bool allow_path) {
  ServerUrl out;
  std::string_view rest = url;
  if (rest.starts_with("https://")) {
    out.tls = true;
    out.port = 443;
    rest.remove_prefix(8);
  } else if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else if (rest.find("://") != std::string_view::npos) {
    return InvalidArgument(
        "must start with http:// or https:// (got \"" + std::string(url.substr(0, 200)) + "\")",
        field);
  } else {
    out.port = kDefaultServerPort;  // a bare host[:port]: plain HTTP
  }
  if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    std::string_view path = rest.substr(slash);
    rest = rest.substr(0, slash);
    while (!path.empty() && path.back() == '/') path.remove_suffix(1);
    if (!path.empty() && !allow_path) {
      return InvalidArgument("must be a scheme, host and port without a path", field);
    }
    for (char c : path) {
      if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '?' || c == '#') {
        return InvalidArgument("has a bad character in its path", field);
      }
    }
    out.path_prefix = std::string(path);
  }
  if (rest.find('@') != std::string_view::npos) {
    return InvalidArgument("must not hold a user name or password (user@host)", field);
  }
  std::string_view port_text;
  bool has_port = false;
  if (rest.starts_with("[")) {
    size_t close = rest.find(']');
    if (close == std::string_view::npos) return InvalidArgument("unclosed '[' in host", field);
    out.host = std::string(rest.substr(1, close - 1));
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return InvalidArgument("malformed host:port", field);
      port_text = after.substr(1);
      has_port = true;
    }
  } else {
    size_t colon = rest.find(':');
    out.host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = rest.substr(colon + 1);
      has_port = true;
      if (port_text.find(':') != std::string_view::npos) {
        return InvalidArgument("an IPv6 host goes in brackets, e.g. [::1]:8443", field);
      }
    }
  }
  if (out.host.empty()) return InvalidArgument("has no host", field);
  for (char c : out.host) {
    if (IsBadHostChar(c)) return InvalidArgument("has a bad character in its host", field);
  }
  if (has_port) {
    const std::optional<int64_t> port = ParseWholeNumber(port_text);
    if (!port || *port < 1 || *port > 65535) return InvalidArgument("port must be 1..65535", field);
    out.port = static_cast<uint16_t>(*port);
  }
  return out;
}

bool IsLoopbackHost(std::string_view host) {
  if (host == "localhost") return true;
  std::string h(host);
  in_addr v4{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

}  // namespace tessera::api
