// HeaderMap: the header fields of a Beast message (request or response) as
// HttpClient's responses and HttpServer's requests carry them.
//
// For the .cc files of HttpClient and HttpServer only (Beast stays out of api/'s
// public headers). Thread safety: a pure function.
#ifndef TESSERA_API_HTTP_FIELDS_H_
#define TESSERA_API_HTTP_FIELDS_H_

#include <algorithm>
#include <boost/beast/http.hpp>
#include <cctype>
#include <map>
#include <string>

#include "api/beast_aliases.h"

namespace tessera::api {

// Every field of `fields` under its lower-case name; a name that stands more
// than once gets its values joined by ", ", in the order they came.
inline std::map<std::string, std::string> HeaderMap(const http::fields& fields) {
  std::map<std::string, std::string> out;
  for (const auto& field : fields) {
    std::string name(field.name_string());
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    auto [it, inserted] = out.emplace(name, std::string(field.value()));
    if (!inserted) it->second += ", " + std::string(field.value());
  }
  return out;
}

}  // namespace tessera::api

#endif  // TESSERA_API_HTTP_FIELDS_H_
