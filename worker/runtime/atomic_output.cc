#include "worker/runtime/atomic_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

namespace tessera::worker {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kTempMarker = ".tmp-";

std::string ErrnoText(int err) { return std::strerror(err); }

}  // namespace

Status FsyncPath(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return Internal("opening " + path + " for fsync: " + ErrnoText(err));
  }
  Status s;
  if (::fsync(fd) != 0) {
    const int err = errno;
    s = Internal("fsync " + path + ": " + ErrnoText(err));
  }
  ::close(fd);
  return s;
}

namespace {

// Prefix of every temporary name of `final_name`: ".<name>.tmp-".
std::string TempPrefix(const std::string& final_name) {
  return "." + final_name + std::string(kTempMarker);
}

std::string OwnPidTag() { return std::to_string(::getpid()) + "-"; }

}  // namespace

std::string TempPathFor(const std::string& final_path) {
  static std::atomic<uint64_t> counter{0};
  const fs::path p(final_path);
  const std::string name =
      TempPrefix(p.filename().string()) + OwnPidTag() + std::to_string(counter.fetch_add(1));
  return (p.parent_path() / name).string();
}

bool IsTempFileName(std::string_view file_name) {
  if (file_name.size() < 2 || file_name[0] != '.') return false;
  const size_t at = file_name.rfind(kTempMarker);
  if (at == std::string_view::npos || at < 2) return false;
  // "<pid>-<n>" after the marker.
  std::string_view rest = file_name.substr(at + kTempMarker.size());
  const size_t dash = rest.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == rest.size()) return false;
  for (size_t i = 0; i < rest.size(); ++i) {
    if (i != dash && (rest[i] < '0' || rest[i] > '9')) return false;
  }
  return true;
}

Status WriteAtomically(const std::string& path,
                       const std::function<Status(const std::string& tmp_path)>& write,
                       const AtomicWriteFaults& faults) {
  const fs::path final_path(path);
  fs::path dir = final_path.parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Internal("creating " + dir.string() + ": " + ec.message());
  const std::string tmp = TempPathFor(path);
  auto discard = [&tmp] {
    std::error_code ignored;
    fs::remove(tmp, ignored);
  };
  Status written = write(tmp);
  if (!written.ok()) {
    discard();
    return written;
  }
  if (faults) TESSERA_RETURN_IF_ERROR(faults(AtomicWriteStep::kAfterWrite, tmp));
  Status synced = FsyncPath(tmp, /*directory=*/false);
  if (!synced.ok()) {
    discard();
    return synced;
  }
  if (faults) TESSERA_RETURN_IF_ERROR(faults(AtomicWriteStep::kAfterSync, tmp));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    if (err == ENOENT) {
      // Another writer of the same item removed our temporary file as stale.
      if (fs::exists(final_path, ec)) return Status::Ok();
      return Unavailable("temporary file of " + path + " vanished (another writer?)");
    }
    discard();
    return Internal("renaming " + tmp + " to " + path + ": " + ErrnoText(err));
  }
  if (faults) TESSERA_RETURN_IF_ERROR(faults(AtomicWriteStep::kAfterRename, tmp));
  return FsyncPath(dir.string(), /*directory=*/true);
}

Status WriteFileAtomically(const std::string& path, std::string_view bytes,
                           const AtomicWriteFaults& faults) {
  return WriteAtomically(
      path,
      [bytes](const std::string& tmp) -> Status {
        const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) {
          const int err = errno;
          return Internal("creating " + tmp + ": " + ErrnoText(err));
        }
        size_t done = 0;
        while (done < bytes.size()) {
          const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
          if (n < 0) {
            const int err = errno;
            if (err == EINTR) continue;
            ::close(fd);
            return Internal("writing " + tmp + ": " + ErrnoText(err));
          }
          done += static_cast<size_t>(n);
        }
        if (::close(fd) != 0) {
          const int err = errno;
          return Internal("closing " + tmp + ": " + ErrnoText(err));
        }
        return Status::Ok();
      },
      faults);
}

namespace {

// Removes the temporary files in `dir` of the final names in `names`.
Result<int64_t> RemoveTempsIn(const fs::path& dir, const std::set<std::string>& names) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return int64_t{0};
  int64_t removed = 0;
  fs::directory_iterator it(dir, ec);
  if (ec) return Internal("listing " + dir.string() + ": " + ec.message());
  for (const fs::directory_entry& e : it) {
    const std::string name = e.path().filename().string();
    if (!IsTempFileName(name)) continue;
    // ".<final>.tmp-<pid>-<n>": the final name is between the dot and the
    // last marker (a final name may itself hold ".tmp-").
    const size_t at = name.rfind(kTempMarker);
    if (names.count(name.substr(1, at - 1)) == 0) continue;
    std::error_code rm;
    if (fs::remove(e.path(), rm)) ++removed;
    if (rm && rm != std::errc::no_such_file_or_directory) {
      return Internal("removing " + e.path().string() + ": " + rm.message());
    }
  }
  return removed;
}

}  // namespace

Result<int64_t> RemoveStaleTemps(const std::string& path) { return RemoveStaleTempsOf({path}); }

Result<int64_t> RemoveStaleTempsOf(const std::vector<std::string>& paths) {
  std::map<fs::path, std::set<std::string>> by_dir;
  for (const std::string& p : paths) {
    const fs::path final_path(p);
    fs::path dir = final_path.parent_path();
    if (dir.empty()) dir = ".";
    by_dir[dir].insert(final_path.filename().string());
  }
  int64_t removed = 0;
  for (const auto& [dir, names] : by_dir) {
    TESSERA_ASSIGN_OR_RETURN(int64_t n, RemoveTempsIn(dir, names));
    removed += n;
  }
  return removed;
}

}  // namespace tessera::worker
