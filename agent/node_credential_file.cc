#include "agent/node_credential_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "api/node_identity.h"

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
                                                      const std::string& node) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return Errno("cannot stat " + path);
  }
  if ((st.st_mode & 077) != 0 && ::chmod(path.c_str(), 0600) != 0) {
    return Errno("cannot make " + path + " private");
  }
  std::ifstream in(path);
  std::string credential, owner;
  if (!in || !std::getline(in, credential)) {
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
                           const std::string& node) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Errno("cannot write " + tmp);
  const std::string text = credential + "\n" + node + "\n";
  bool ok = ::fchmod(fd, 0600) == 0 &&
            ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    Status st = Errno("cannot write " + path);
    ::unlink(tmp.c_str());
    return st;
  }
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = std::filesystem::current_path();
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

}  // namespace tessera::agent
