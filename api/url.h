// Request-target parsing: "/api/v1/jobs?state=pending&limit=10" into a
// decoded path and query parameters.
//
// Thread safety: pure functions.
#ifndef TESSERA_API_URL_H_
#define TESSERA_API_URL_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tessera::api {

struct Target {
  std::string path;                          // raw path (not decoded), e.g. "/api/v1/jobs/7"
  std::map<std::string, std::string> query;  // decoded names and values
};

// Splits the target at '?', decodes query names and values ('+' is a space,
// %XX escapes). A malformed escape, a repeated or empty parameter name is
// kInvalidArgument naming the parameter (or "query").
// REQUIRES: nothing; any bytes are accepted.
Result<Target> ParseTarget(std::string_view target);

// Decodes %XX escapes (and '+' as space when plus_is_space). nullopt on a
// malformed escape or a decoded NUL byte.
std::optional<std::string> PercentDecode(std::string_view in, bool plus_is_space);

// Escapes everything except unreserved characters (RFC 3986).
std::string PercentEncode(std::string_view in);

// Splits "/a/b/c" into {"a","b","c"}; empty segments are kept so that
// "/a//b" does not match "/a/b".
std::vector<std::string_view> SplitPath(std::string_view path);

}  // namespace tessera::api

#endif  // TESSERA_API_URL_H_
