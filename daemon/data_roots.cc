#include "daemon/data_roots.h"

#include <limits.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

namespace tessera::daemon {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kUser = "{user}";

bool HasDotDot(std::string_view path) {
  for (const fs::path& part : fs::path(path)) {
    if (part == "..") return true;
  }
  return false;
}

bool IsComponent(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

// realpath(3); nullopt when it fails (errno set).
std::optional<std::string> RealPath(const std::string& path) {
  char buffer[PATH_MAX];
  if (::realpath(path.c_str(), buffer) == nullptr) return std::nullopt;
  return std::string(buffer);
}

bool IsUnder(const std::string& resolved, const std::string& root) {
  if (root == "/") return true;
  return resolved == root || (resolved.size() > root.size() && resolved.starts_with(root) &&
                              resolved[root.size()] == '/');
}

// The first path component of `path` after `prefix` ("" when none).
std::string ComponentAfter(std::string_view path, std::string_view prefix) {
  if (!path.starts_with(prefix)) return "";
  std::string_view rest = path.substr(prefix.size());
  return std::string(rest.substr(0, rest.find('/')));
}

}  // namespace

Status ValidateDataRoot(const DataRoot& root, std::string_view field) {
  const std::string f(field);
  if (root.path.empty() || root.path.front() != '/') {
    return InvalidArgument("must be an absolute path", f);
  }
  if (root.path.find('\0') != std::string::npos) return InvalidArgument("contains NUL", f);
  if (HasDotDot(root.path)) return InvalidArgument("must not contain \"..\"", f);
  size_t at = root.path.find(kUser);
  if (at != std::string::npos) {
    const size_t end = at + kUser.size();
    if (root.path[at - 1] != '/' || (end < root.path.size() && root.path[end] != '/')) {
      return InvalidArgument("{user} must be a whole path component", f);
    }
    if (root.path.find(kUser, end) != std::string::npos) {
      return InvalidArgument("{user} may appear once", f);
    }
  } else if (root.path.find_first_of("{}") != std::string::npos) {
    return InvalidArgument("the only placeholder is {user}", f);
  }
  return Status::Ok();
}

Result<std::string> ResolvePath(std::string_view path, bool must_exist, std::string_view field) {
  const std::string f(field);
  if (path.empty() || path.front() != '/') return InvalidArgument("must be an absolute path", f);
  if (path.find('\0') != std::string_view::npos) return InvalidArgument("contains NUL", f);
  if (HasDotDot(path)) return InvalidArgument("must not contain \"..\"", f);
  fs::path existing = fs::path(path).lexically_normal();
  fs::path rest;
  while (true) {
    if (auto real = RealPath(existing.string())) {
      if (must_exist && !rest.empty()) return InvalidArgument("does not exist", f);
      fs::path out(*real);
      if (!rest.empty()) out /= rest;
      std::string text = out.lexically_normal().string();
      while (text.size() > 1 && text.back() == '/') text.pop_back();
      return text;
    }
    if (errno != ENOENT && errno != ENOTDIR) {
      return InvalidArgument("cannot be resolved: " + std::string(std::strerror(errno)), f);
    }
    if (must_exist) return InvalidArgument("does not exist", f);
    if (!existing.has_relative_path()) return InvalidArgument("cannot be resolved", f);
    fs::path name = existing.filename();
    if (name.empty()) {  // a trailing slash
      existing = existing.parent_path();
      continue;
    }
    rest = rest.empty() ? name : name / rest;
    existing = existing.parent_path();
  }
}

DataRoots::DataRoots(std::vector<DataRoot> roots) : roots_(std::move(roots)) {}

Result<std::string> DataRoots::Check(std::string_view path, const DataUser& who, DataAccess access,
                                     bool must_exist, std::string_view field) const {
  const std::string f(field);
  if (!configured()) {
    if (who.admin) return std::string(path);
    return InvalidArgument(
        "no data roots are configured on this cluster, so only admins may name paths (an admin "
        "sets data_roots in tesserad's config)",
        f);
  }
  TESSERA_ASSIGN_OR_RETURN(std::string resolved, ResolvePath(path, must_exist, field));
  for (const DataRoot& root : roots_) {
    if (access == DataAccess::kWrite && !root.writable) continue;
    // The user names this root stands for: the owner's, or for an admin the
    // one the path names (as given, and as resolved).
    std::vector<std::string> candidates;
    const size_t at = root.path.find(kUser);
    if (at == std::string::npos) {
      candidates.push_back(root.path);
    } else {
      const std::string prefix = root.path.substr(0, at);
      const std::string suffix = root.path.substr(at + kUser.size());
      std::vector<std::string> names;
      if (!who.admin) {
        names.push_back(who.name);
      } else {
        names.push_back(ComponentAfter(path, prefix));
        if (auto real_prefix = RealPath(prefix)) {
          names.push_back(
              ComponentAfter(resolved, *real_prefix + (*real_prefix == "/" ? "" : "/")));
        }
      }
      for (const std::string& name : names) {
        if (IsComponent(name)) candidates.push_back(prefix + name + suffix);
      }
    }
    for (const std::string& candidate : candidates) {
      auto real_root = RealPath(candidate);
      if (real_root && IsUnder(resolved, *real_root)) return resolved;
    }
  }
  return InvalidArgument(std::string("is outside every data root ") +
                             (who.admin ? "" : "user " + who.name + " ") + "may " +
                             (access == DataAccess::kWrite ? "write" : "read"),
                         f);
}

}  // namespace tessera::daemon
