#include "api/join_bundle.h"

#include "api/server_url.h"
#include "api/tls_context.h"

namespace tessera::api {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

std::string FormatJoinBundle(const JoinBundle& b) {
  std::string out =
      "# tessera join bundle (secret: it holds the join token). On a new node:\n"
      "#   tessera-agent --join-bundle THIS_FILE --node NAME ...\n";
  out += "controller = \"" + b.controller + "\"\n";
  if (!b.ca_sha256.empty()) out += "ca-sha256 = \"" + DisplayFingerprint(b.ca_sha256) + "\"\n";
  out += "join-token = \"" + b.join_token + "\"\n";
  return out;
}

Result<JoinBundle> ParseJoinBundle(std::string_view text) {
  JoinBundle out;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = Trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.empty() || line.front() == '#') continue;
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgument("expected key = \"value\" lines", "join_bundle");
    }
    std::string key(Trim(line.substr(0, eq)));
    std::string_view value = Trim(line.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    if (key == "controller") {
      out.controller = std::string(value);
    } else if (key == "ca-sha256") {
      TESSERA_ASSIGN_OR_RETURN(out.ca_sha256, NormalizeSha256Fingerprint(value, key));
    } else if (key == "join-token") {
      out.join_token = std::string(value);
    } else {
      return InvalidArgument("unknown key in the join bundle", key);
    }
  }
  if (out.controller.empty()) return InvalidArgument("is missing", "controller");
  TESSERA_RETURN_IF_ERROR(ParseServerUrl(out.controller, "controller").status());
  if (out.join_token.empty()) return InvalidArgument("is missing", "join-token");
  return out;
}

}  // namespace tessera::api
