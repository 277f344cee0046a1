#include "api/url.h"

#include "common/hex.h"

namespace tessera::api {

std::optional<std::string> PercentDecode(std::string_view in, bool plus_is_space) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return std::nullopt;
      Result<std::string> decoded = HexDecode(in.substr(i + 1, 2));
      if (!decoded.ok() || (*decoded)[0] == '\0') return std::nullopt;
      out.push_back((*decoded)[0]);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else if (c == '\0') {
      return std::nullopt;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string PercentEncode(std::string_view in) {
  std::string out;
  for (unsigned char c : in) {
    bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out += HexEncode(&c, 1, HexCase::kUpper);
    }
  }
  return out;
}

Result<Target> ParseTarget(std::string_view target) {
  Target t;
  size_t q = target.find('?');
  t.path = std::string(target.substr(0, q));
  if (q == std::string_view::npos) return t;
  std::string_view query = target.substr(q + 1);
  // A fragment is never sent by clients; drop it if one is.
  if (size_t hash = query.find('#'); hash != std::string_view::npos) query = query.substr(0, hash);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;  // "a=1&&b=2"
    size_t eq = pair.find('=');
    std::string_view raw_name = pair.substr(0, eq);
    std::string_view raw_value =
        eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    auto name = PercentDecode(raw_name, true);
    if (!name || name->empty()) return InvalidArgument("malformed query parameter name", "query");
    auto value = PercentDecode(raw_value, true);
    if (!value) return InvalidArgument("malformed percent-encoding", *name);
    if (!t.query.emplace(*name, std::move(*value)).second) {
      return InvalidArgument("is given more than once", *name);
    }
  }
  return t;
}

std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> out;
  if (!path.empty() && path.front() == '/') path.remove_prefix(1);
  if (path.empty()) return out;
  while (true) {
    size_t slash = path.find('/');
    out.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

}  // namespace tessera::api
