#include "common/file_system.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace tessera {

Status FileError(std::string_view op, const std::filesystem::path& path, int err) {
  std::string message(op);
  message.append(" ").append(path.string()).append(": ").append(std::strerror(err));
  if (err == ENOENT || err == ENOTDIR) return NotFound(std::move(message));
  return Internal(std::move(message));
}

namespace {

// Closes `fd`, keeping errno of the failure being reported.
void CloseQuietly(int fd) {
  const int saved = errno;
  ::close(fd);
  errno = saved;
}

// open() + fsync() + close() of a file or folder.
Status SyncPath(const std::filesystem::path& path, bool directory) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0) return FileError("opening for fsync", path, errno);
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return FileError("fsync", path, err);
  }
  if (::close(fd) != 0) return FileError("closing", path, errno);
  return Status::Ok();
}

class PosixFileSystem final : public FileSystem {
 public:
  Result<std::string> ReadFile(const std::filesystem::path& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return FileError("reading", path, errno);
    std::string out;
    char buffer[64 * 1024];
    for (;;) {
      const ssize_t n = ::read(fd, buffer, sizeof(buffer));
      if (n < 0) {
        if (errno == EINTR) continue;
        const int err = errno;
        ::close(fd);
        return FileError("reading", path, err);
      }
      if (n == 0) break;
      out.append(buffer, static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
  }

  Status WriteFile(const std::filesystem::path& path, std::string_view data,
                   const WriteFileOptions& options) override {
    const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (options.exclusive ? O_EXCL : O_TRUNC);
    const int fd = ::open(path.c_str(), flags, static_cast<mode_t>(options.mode));
    if (fd < 0) return FileError("creating", path, errno);
    if (options.ignore_umask && ::fchmod(fd, static_cast<mode_t>(options.mode)) != 0) {
      CloseQuietly(fd);
      return FileError("setting the mode of", path, errno);
    }
    size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        CloseQuietly(fd);
        return FileError("writing", path, errno);
      }
      done += static_cast<size_t>(n);
    }
    if (options.sync && ::fsync(fd) != 0) {
      CloseQuietly(fd);
      return FileError("fsync", path, errno);
    }
    if (::close(fd) != 0) return FileError("closing", path, errno);
    return Status::Ok();
  }

  Status SyncFile(const std::filesystem::path& path) override {
    return SyncPath(path, /*directory=*/false);
  }

  Status SyncDir(const std::filesystem::path& dir) override {
    return SyncPath(dir.empty() ? std::filesystem::path(".") : dir, /*directory=*/true);
  }

  Status Rename(const std::filesystem::path& from, const std::filesystem::path& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return FileError("renaming " + from.string() + " to", to, errno);
    }
    return Status::Ok();
  }

  Status Remove(const std::filesystem::path& path) override {
    if (::remove(path.c_str()) != 0) return FileError("removing", path, errno);
    return Status::Ok();
  }

  Status CreateDirs(const std::filesystem::path& dir) override {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return FileError("creating the folder", dir, ec.value());
    return Status::Ok();
  }

  bool Exists(const std::filesystem::path& path) override {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0;
  }

  Result<FileStat> Stat(const std::filesystem::path& path) override {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return FileError("stat", path, errno);
    return FileStat{static_cast<int64_t>(st.st_size),
                    static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  }
};

}  // namespace

FileSystem* FileSystem::Default() {
  static FileSystem* fs = new PosixFileSystem();
  return fs;
}

}  // namespace tessera
