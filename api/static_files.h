// Static files of the web UI, served from one directory at "/".
//
// Only regular files below the root are served: the request path is
// percent-decoded, split on '/', and any ".", "..", empty-after-decoding
// segment containing '/', '\\' or NUL is refused, so a request can never
// name a file outside the root. Symlinks are resolved and must stay below
// the root. "/" and directory paths serve their index.html.
//
// Thread safety: pure functions over the filesystem.
#ifndef TESSERA_API_STATIC_FILES_H_
#define TESSERA_API_STATIC_FILES_H_

#include <string>
#include <string_view>

#include "common/status.h"

namespace tessera::api {

struct StaticFile {
  std::string content_type;
  std::string body;
};

// Files larger than this are refused (the UI is small).
inline constexpr size_t kMaxStaticFileBytes = 16 * 1024 * 1024;

// path: the raw request path ("/app.js", "/" ...), without the query.
// kNotFound when no such file; kInvalidArgument naming "path" for a path
// that tries to leave the root or is malformed.
Result<StaticFile> ReadStaticFile(const std::string& root, std::string_view path);

// "text/html; charset=utf-8" for ".html" and so on; application/octet-stream
// when unknown.
std::string_view ContentTypeForPath(std::string_view path);

}  // namespace tessera::api

#endif  // TESSERA_API_STATIC_FILES_H_
