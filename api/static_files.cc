#include "api/static_files.h"

#include <array>
#include <filesystem>
#include <sstream>
#include <system_error>
#include <utility>

#include "api/url.h"
#include "common/file_system.h"

namespace tessera::api {
namespace {

namespace fs = std::filesystem;

constexpr std::array<std::pair<std::string_view, std::string_view>, 16> kTypes = {{
    {".html", "text/html; charset=utf-8"},
    {".htm", "text/html; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".mjs", "text/javascript; charset=utf-8"},
    {".json", "application/json"},
    {".map", "application/json"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".jpg", "image/jpeg"},
    {".jpeg", "image/jpeg"},
    {".gif", "image/gif"},
    {".ico", "image/x-icon"},
    {".txt", "text/plain; charset=utf-8"},
    {".woff2", "font/woff2"},
    {".webp", "image/webp"},
}};

bool IsBelow(const fs::path& root, const fs::path& p) {
  auto r = root.begin();
  auto q = p.begin();
  for (; r != root.end(); ++r, ++q) {
    if (q == p.end() || *r != *q) return false;
  }
  return true;
}

}  // namespace

std::string_view ContentTypeForPath(std::string_view path) {
  size_t dot = path.rfind('.');
  size_t slash = path.rfind('/');
  if (dot == std::string_view::npos || (slash != std::string_view::npos && dot < slash)) {
    return "application/octet-stream";
  }
  std::string ext(path.substr(dot));
  for (char& c : ext) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  for (const auto& [e, type] : kTypes) {
    if (e == ext) return type;
  }
  return "application/octet-stream";
}

Result<StaticFile> ReadStaticFile(const std::string& root, std::string_view path) {
  if (root.empty()) return NotFound("no web UI directory is configured");
  if (path.empty() || path.front() != '/') return InvalidArgument("must start with '/'", "path");
  fs::path relative;
  for (std::string_view raw : SplitPath(path)) {
    auto seg = PercentDecode(raw, /*plus_is_space=*/false);
    if (!seg) return InvalidArgument("malformed percent-encoding", "path");
    if (seg->empty()) continue;  // "//" or a trailing '/'
    if (*seg == "." || *seg == ".." || seg->find('/') != std::string::npos ||
        seg->find('\\') != std::string::npos) {
      return InvalidArgument("must not leave the web UI directory", "path");
    }
    relative /= *seg;
  }
  std::error_code ec;
  fs::path canonical_root = fs::canonical(root, ec);
  if (ec) return NotFound("web UI directory is missing");
  fs::path target = canonical_root / relative;
  if (fs::is_directory(target, ec)) target /= "index.html";
  fs::path resolved = fs::canonical(target, ec);
  if (ec) return NotFound("no such file");
  if (!IsBelow(canonical_root, resolved)) return NotFound("no such file");
  if (!fs::is_regular_file(resolved, ec) || ec) return NotFound("no such file");
  auto size = fs::file_size(resolved, ec);
  if (ec) return NotFound("no such file");
  if (size > kMaxStaticFileBytes) return NotFound("file too large to serve");
  Result<std::string> body = FileSystem::Default()->ReadFile(resolved);
  if (!body.ok()) return NotFound("no such file");
  return StaticFile{std::string(ContentTypeForPath(resolved.string())), *std::move(body)};
}

}  // namespace tessera::api
