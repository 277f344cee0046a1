// FileSystem: the one way Tessera code reads whole files and writes files
// durably, so tests can make any of those calls fail (as LevelDB's Env).
//
// The interface holds the primitives (read, write, fsync, rename, remove,
// make folders); common/atomic_file.h builds the atomic replace of a file
// from them, so a fault injected into a primitive (FaultyFileSystem,
// common/faulty_file_system.h) reaches every writer built on it.
// FileSystem::Default() is the real one (POSIX calls); FileSystemWrapper
// forwards every call to another FileSystem, for wrappers that change a few.
//
// Errors: every failure is a Status naming the path and the operation,
// "<op> <path>: <errno text>" (FileError below): kNotFound when the path (or a
// folder of it) does not exist, kInternal otherwise.
//
// Ownership: callers keep a FileSystem* they do not own; Default() is never
// destroyed. Thread safety: every implementation is safe to call from any
// thread; two writers of one path race as the file system does (the last
// rename wins).
#ifndef TESSERA_COMMON_FILE_SYSTEM_H_
#define TESSERA_COMMON_FILE_SYSTEM_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tessera {

struct WriteFileOptions {
  uint32_t mode = 0644;       // permission bits of a new file (the umask applies)
  bool ignore_umask = false;  // true: the file gets exactly `mode` (fchmod)
  bool exclusive = false;     // true: fail (kInternal, EEXIST) when the file exists
  bool sync = false;          // true: fsync the file before closing it
};

// What stat(2) tells of a file: enough to see that it changed.
struct FileStat {
  int64_t size_bytes = 0;
  int64_t modified_ns = 0;  // last modification, nanoseconds since the epoch
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // The real file system. Never destroyed.
  static FileSystem* Default();

  // The whole file, read until its end (so /proc files work too).
  virtual Result<std::string> ReadFile(const std::filesystem::path& path) = 0;

  // Creates `path` (or truncates it) and writes all of `data`; closing is
  // checked. Not atomic: a reader or a crash may see a part (for a file that
  // replaces another, use WriteFileAtomically of common/atomic_file.h).
  virtual Status WriteFile(const std::filesystem::path& path, std::string_view data,
                           const WriteFileOptions& options) = 0;

  // fsync of a file's data, by path.
  virtual Status SyncFile(const std::filesystem::path& path) = 0;

  // fsync of a folder, so the names created, renamed or removed in it last.
  virtual Status SyncDir(const std::filesystem::path& dir) = 0;

  // rename(2): replaces `to` atomically when it exists.
  virtual Status Rename(const std::filesystem::path& from, const std::filesystem::path& to) = 0;

  // Removes a file (or an empty folder). kNotFound when it does not exist.
  virtual Status Remove(const std::filesystem::path& path) = 0;

  // Makes the folder and its missing parents (mkdir -p). OK when it exists.
  virtual Status CreateDirs(const std::filesystem::path& dir) = 0;

  // Whether something exists at `path` (false when that cannot be told).
  virtual bool Exists(const std::filesystem::path& path) = 0;

  // The size and modification time of what is at `path` (links followed).
  virtual Result<FileStat> Stat(const std::filesystem::path& path) = 0;
};

// Forwards every call to `base` (not owned). Subclasses override the calls
// they change, as LevelDB's EnvWrapper.
class FileSystemWrapper : public FileSystem {
 public:
  explicit FileSystemWrapper(FileSystem* base) : base_(base) {}

  Result<std::string> ReadFile(const std::filesystem::path& path) override {
    return base_->ReadFile(path);
  }
  Status WriteFile(const std::filesystem::path& path, std::string_view data,
                   const WriteFileOptions& options) override {
    return base_->WriteFile(path, data, options);
  }
  Status SyncFile(const std::filesystem::path& path) override { return base_->SyncFile(path); }
  Status SyncDir(const std::filesystem::path& dir) override { return base_->SyncDir(dir); }
  Status Rename(const std::filesystem::path& from, const std::filesystem::path& to) override {
    return base_->Rename(from, to);
  }
  Status Remove(const std::filesystem::path& path) override { return base_->Remove(path); }
  Status CreateDirs(const std::filesystem::path& dir) override { return base_->CreateDirs(dir); }
  bool Exists(const std::filesystem::path& path) override { return base_->Exists(path); }
  Result<FileStat> Stat(const std::filesystem::path& path) override { return base_->Stat(path); }

  FileSystem* base() const { return base_; }

 private:
  FileSystem* const base_;
};

// The Status of a failed file operation: "<op> <path>: <strerror(err)>",
// kNotFound for ENOENT and ENOTDIR, kInternal otherwise. `op` is a verb such
// as "reading", "fsync", "renaming .../x.tmp to" (the message then ends with
// the path).
Status FileError(std::string_view op, const std::filesystem::path& path, int err);

}  // namespace tessera

#endif  // TESSERA_COMMON_FILE_SYSTEM_H_
