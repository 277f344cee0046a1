// Atomic file replacement: the one write-temp, fsync, rename of Tessera.
//
// WriteFileAtomically(fs, path, data):
//   1. writes `data` to a new temporary file in the folder of `path`,
//      "<dir>/.<name>.tmp-<pid>-<n>" (TempPathFor), so a crash leaves a
//      recognisable temporary file and never a partial `path`;
//   2. fsyncs the temporary file;
//   3. renames it over `path`;
//   4. fsyncs the folder, so the new name survives a power loss.
// Readers see the old content or the new one, never a mix; once it returned
// OK the new content is durable. Every step goes through `fs`
// (common/file_system.h), so an injected fault reaches it. A failure at
// steps 1-3 removes the temporary file; every error is returned as
// "cannot write <path>: <the failed step, naming its path>", with the code
// of the failed step (kInternal, or kNotFound for a missing folder).
//
// Thread safety: safe to call concurrently; temporary names are unique per
// process and call. Two writers of one path: the last rename wins.
#ifndef TESSERA_COMMON_ATOMIC_FILE_H_
#define TESSERA_COMMON_ATOMIC_FILE_H_

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "common/file_system.h"
#include "common/status.h"

namespace tessera {

// Where a simulated crash may stop an atomic write (AtomicWriteFaults).
enum class AtomicWriteStep {
  kAfterWrite,   // bytes written to the temporary file, not yet fsynced
  kAfterSync,    // temporary file fsynced, not yet renamed
  kAfterRename,  // renamed, folder not yet fsynced
};

// A test hook called between the steps: a non-OK Status stops the write
// right there and is returned WITHOUT cleaning up, which is what a crash at
// that point leaves on disk.
using AtomicWriteFaults = std::function<Status(AtomicWriteStep step, const std::string& tmp_path)>;

struct AtomicWriteOptions {
  uint32_t mode = 0644;             // permission bits of the file (the umask applies)
  bool ignore_umask = false;        // true: exactly `mode` (secrets, files other accounts read)
  bool create_parent_dirs = false;  // make the folder of `path` first when missing
  // Another process may write the same bytes to `path` at the same time and
  // remove this write's temporary file as stale (RemoveStaleTemps of the
  // worker's outputs). When the rename then finds the temporary file gone,
  // the write counts as done if `path` exists; kUnavailable otherwise.
  bool shared_writer = false;
  AtomicWriteFaults faults;  // test hook; empty in production
};

// See the file comment. REQUIRES: `fs` outlives the call.
Status WriteFileAtomically(FileSystem& fs, const std::filesystem::path& path, std::string_view data,
                           const AtomicWriteOptions& options = {});

// "<dir>/.<name>.tmp-<pid>-<counter>": unique per process and call.
std::string TempPathFor(const std::filesystem::path& final_path);

// True when `file_name` (no folder) is a name TempPathFor made for some final
// file in the same folder.
bool IsTempFileName(std::string_view file_name);

}  // namespace tessera

#endif  // TESSERA_COMMON_ATOMIC_FILE_H_
