// FaultyFileSystem: a FileSystem that fails chosen calls, for tests of what
// a writer or reader does when the disk says no (LevelDB's fault-injecting
// Env). Everything else is forwarded to a real FileSystem.
//
// FailNext(op, path_part, err) arms one fault: the next call of kind `op`
// whose path contains `path_part` ("" matches every path) fails with errno
// `err`, with the Status the real call would return (FileError of
// common/file_system.h); the faults fire once each, in the order armed. A
// failed write leaves what a real one would: the file created, its data not
// written (or written but not fsynced, for a failed fsync of
// WriteFileOptions::sync). Failed fsync, rename and remove change nothing.
//
// kSync matches the fsync of a file (SyncFile, WriteFileOptions::sync),
// kSyncDir that of a folder (SyncDir); kRename matches either path of a
// rename.
//
// Ownership: `base` is not owned and must outlive this object.
// Thread safety: every method may be called from any thread.
#ifndef TESSERA_COMMON_FAULTY_FILE_SYSTEM_H_
#define TESSERA_COMMON_FAULTY_FILE_SYSTEM_H_

#include <deque>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>

#include "common/file_system.h"

namespace tessera {

enum class FileOp { kRead, kWrite, kSync, kSyncDir, kRename, kRemove, kCreateDirs };

// One fault to arm: a call of kind `op` fails with errno `err` (tables of
// tests that walk a writer through its failures).
struct FileFault {
  FileOp op;
  int err;
};

class FaultyFileSystem final : public FileSystemWrapper {
 public:
  explicit FaultyFileSystem(FileSystem* base = FileSystem::Default()) : FileSystemWrapper(base) {}

  // Arms one fault (see the file comment).
  void FailNext(FileOp op, std::string path_part, int err);
  // How many armed faults have fired so far.
  int fired() const;
  // Faults armed that have not fired.
  size_t pending() const;

  Result<std::string> ReadFile(const std::filesystem::path& path) override;
  Status WriteFile(const std::filesystem::path& path, std::string_view data,
                   const WriteFileOptions& options) override;
  Status SyncFile(const std::filesystem::path& path) override;
  Status SyncDir(const std::filesystem::path& dir) override;
  Status Rename(const std::filesystem::path& from, const std::filesystem::path& to) override;
  Status Remove(const std::filesystem::path& path) override;
  Status CreateDirs(const std::filesystem::path& dir) override;

 private:
  struct Fault {
    FileOp op;
    std::string path_part;
    int err;
  };
  // The errno of the first armed fault of `op` matching one of the paths
  // (consumed), or 0.
  int Take(FileOp op, const std::filesystem::path& a, const std::filesystem::path& b = {});

  mutable std::mutex mu_;
  std::deque<Fault> faults_;  // guarded by mu_
  int fired_ = 0;             // guarded by mu_
};

}  // namespace tessera

#endif  // TESSERA_COMMON_FAULTY_FILE_SYSTEM_H_
