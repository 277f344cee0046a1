#include "common/faulty_file_system.h"

namespace tessera {

void FaultyFileSystem::FailNext(FileOp op, std::string path_part, int err) {
  std::lock_guard lock(mu_);
  faults_.push_back(Fault{op, std::move(path_part), err});
}

int FaultyFileSystem::fired() const {
  std::lock_guard lock(mu_);
  return fired_;
}

size_t FaultyFileSystem::pending() const {
  std::lock_guard lock(mu_);
  return faults_.size();
}

int FaultyFileSystem::Take(FileOp op, const std::filesystem::path& a,
                           const std::filesystem::path& b) {
  std::lock_guard lock(mu_);
  for (auto it = faults_.begin(); it != faults_.end(); ++it) {
    if (it->op != op) continue;
    const bool matches = a.string().find(it->path_part) != std::string::npos ||
                         (!b.empty() && b.string().find(it->path_part) != std::string::npos);
    if (!matches) continue;
    const int err = it->err;
    faults_.erase(it);
    ++fired_;
    return err;
  }
  return 0;
}

Result<std::string> FaultyFileSystem::ReadFile(const std::filesystem::path& path) {
  if (int err = Take(FileOp::kRead, path)) return FileError("reading", path, err);
  return FileSystemWrapper::ReadFile(path);
}

Status FaultyFileSystem::WriteFile(const std::filesystem::path& path, std::string_view data,
                                   const WriteFileOptions& options) {
  if (int err = Take(FileOp::kWrite, path)) {
    // The file was created; its data never got there.
    TESSERA_RETURN_IF_ERROR(FileSystemWrapper::WriteFile(path, {}, options));
    return FileError("writing", path, err);
  }
  if (options.sync) {
    if (int err = Take(FileOp::kSync, path)) {
      WriteFileOptions unsynced = options;
      unsynced.sync = false;
      TESSERA_RETURN_IF_ERROR(FileSystemWrapper::WriteFile(path, data, unsynced));
      return FileError("fsync", path, err);
    }
  }
  return FileSystemWrapper::WriteFile(path, data, options);
}

Status FaultyFileSystem::SyncFile(const std::filesystem::path& path) {
  if (int err = Take(FileOp::kSync, path)) return FileError("fsync", path, err);
  return FileSystemWrapper::SyncFile(path);
}

Status FaultyFileSystem::SyncDir(const std::filesystem::path& dir) {
  if (int err = Take(FileOp::kSyncDir, dir)) return FileError("fsync", dir, err);
  return FileSystemWrapper::SyncDir(dir);
}

Status FaultyFileSystem::Rename(const std::filesystem::path& from,
                                const std::filesystem::path& to) {
  if (int err = Take(FileOp::kRename, from, to)) {
    return FileError("renaming " + from.string() + " to", to, err);
  }
  return FileSystemWrapper::Rename(from, to);
}

Status FaultyFileSystem::Remove(const std::filesystem::path& path) {
  if (int err = Take(FileOp::kRemove, path)) return FileError("removing", path, err);
  return FileSystemWrapper::Remove(path);
}

Status FaultyFileSystem::CreateDirs(const std::filesystem::path& dir) {
  if (int err = Take(FileOp::kCreateDirs, dir)) return FileError("creating the folder", dir, err);
  return FileSystemWrapper::CreateDirs(dir);
}

}  // namespace tessera
