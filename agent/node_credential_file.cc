#include "agent/node_credential_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "api/node_identity.h"
#include "common/atomic_file.h"

namespace tessera::agent {
namespace {

constexpr const char* kField = "credential_file";

Status Errno(std::string what) {
  const int err = errno;
  what.append(": ").append(std::strerror(err));
  return InvalidArgument(std::move(what), kField);
}

}  // namespace

Result<std::optional<std::string>> LoadNodeCredential(const std::string& path,
                                                      const std::string& node, FileSystem* fs) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return Errno("cannot stat " + path);
  }
  if ((st.st_mode & 077) != 0 && ::chmod(path.c_str(), 0600) != 0) {
    return Errno("cannot make " + path + " private");
  }
  Result<std::string> text = fs->ReadFile(path);
  std::istringstream in(text.ok() ? *text : std::string());
  std::string credential, owner;
  if (!text.ok() || !std::getline(in, credential)) {
    return InvalidArgument("cannot read " + path, kField);
  }
  std::getline(in, owner);
  if (!api::LooksLikeNodeCredential(credential)) {
    return InvalidArgument(path + " does not hold a node credential (delete it to enrol again)",
                           kField);
  }
  if (owner != node) return std::optional<std::string>();
  return std::optional<std::string>(credential);
}

Status StoreNodeCredential(const std::string& path, const std::string& credential,
                           const std::string& node, FileSystem* fs) {
  AtomicWriteOptions options;
  options.mode = 0600;
  options.ignore_umask = true;
  Status written = WriteFileAtomically(*fs, path, credential + "\n" + node + "\n", options);
  if (!written.ok()) return InvalidArgument(written.message(), kField);
  return Status::Ok();
}

}  // namespace tessera::agent
