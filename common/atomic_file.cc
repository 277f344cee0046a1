#include "common/atomic_file.h"

#include <unistd.h>

#include <atomic>

namespace tessera {
namespace {

constexpr std::string_view kTempMarker = ".tmp-";

// "cannot write <path>: <what failed>", with the code of what failed.
Status CannotWrite(const std::filesystem::path& path, const Status& cause) {
  return Status(cause.code(), "cannot write " + path.string() + ": " + cause.message());
}

}  // namespace

std::string TempPathFor(const std::filesystem::path& final_path) {
  static std::atomic<uint64_t> counter{0};
  const std::string name = "." + final_path.filename().string() + std::string(kTempMarker) +
                           std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
  return (final_path.parent_path() / name).string();
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

Status WriteFileAtomically(FileSystem& fs, const std::filesystem::path& path, std::string_view data,
                           const AtomicWriteOptions& options) {
  std::filesystem::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  if (options.create_parent_dirs) {
    if (Status made = fs.CreateDirs(dir); !made.ok()) return CannotWrite(path, made);
  }
  const std::string tmp = TempPathFor(path);
  auto discard = [&](const Status& cause) {
    fs.Remove(tmp).IgnoreError();  // it may not exist (creating it failed)
    return CannotWrite(path, cause);
  };
  WriteFileOptions file;
  file.mode = options.mode;
  file.ignore_umask = options.ignore_umask;
  file.exclusive = true;
  if (Status written = fs.WriteFile(tmp, data, file); !written.ok()) return discard(written);
  if (options.faults) TESSERA_RETURN_IF_ERROR(options.faults(AtomicWriteStep::kAfterWrite, tmp));
  if (Status synced = fs.SyncFile(tmp); !synced.ok()) return discard(synced);
  if (options.faults) TESSERA_RETURN_IF_ERROR(options.faults(AtomicWriteStep::kAfterSync, tmp));
  if (Status renamed = fs.Rename(tmp, path); !renamed.ok()) {
    if (options.shared_writer && !fs.Exists(tmp)) {
      // The other writer of the same bytes removed our temporary file as stale.
      if (fs.Exists(path)) return Status::Ok();
      return Unavailable("cannot write " + path.string() + ": its temporary file " + tmp +
                         " vanished (another writer?)");
    }
    return discard(renamed);
  }
  if (options.faults) TESSERA_RETURN_IF_ERROR(options.faults(AtomicWriteStep::kAfterRename, tmp));
  if (Status synced = fs.SyncDir(dir); !synced.ok()) return CannotWrite(path, synced);
  return Status::Ok();
}

}  // namespace tessera
