// Atomic output files: a file appears at its final path complete or not at
// all, even if the process is killed (kill -9, power loss) at any moment.
//
// WriteAtomically(path, write):
//   1. removes nothing; creates a temporary name in the same directory,
//      "<dir>/.<name>.tmp-<pid>-<n>" (TempPathFor), so a crash leaves a
//      recognisable temporary file and never a partial "<name>";
//   2. calls `write(tmp)` to produce the bytes (e.g. WritePng);
//   3. fsyncs the temporary file, renames it over `path`, fsyncs the dir.
// A failed `write` or fsync removes the temporary file. The final file
// exists only after step 3, so "output exists" means "output complete".
//
// RemoveStaleTemps(path) deletes the temporary files a crashed writer of
// `path` left behind (call it before writing `path`, never while this
// process is writing it: a restarted process may reuse a pid, so its own
// pid is not spared). If two processes write the
// same path at once (a lease that expired and was handed to another rank),
// one may delete the other's temporary file; the loser's rename then fails,
// and WriteAtomically reports success when the final file exists anyway
// (the winner wrote the same bytes), kUnavailable otherwise.
//
// Fault injection: `AtomicWriteFaults` is called between the steps; a non-OK
// Status stops the write right there and is returned WITHOUT cleaning up,
// which is what a crash at that point leaves on disk.
//
// Thread safety: functions are safe to call concurrently for different
// paths; temporary names are unique per process and call.
#ifndef TESSERA_WORKER_RUNTIME_ATOMIC_OUTPUT_H_
#define TESSERA_WORKER_RUNTIME_ATOMIC_OUTPUT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tessera::worker {

// Where a simulated crash may happen.
enum class AtomicWriteStep {
  kAfterWrite,   // bytes written to the temporary file, not yet fsynced
  kAfterSync,    // temporary file fsynced, not yet renamed
  kAfterRename,  // renamed, directory not yet fsynced
};

// Returns OK to continue, or the Status the write should stop with.
using AtomicWriteFaults = std::function<Status(AtomicWriteStep step, const std::string& tmp_path)>;

// "<dir>/.<name>.tmp-<pid>-<counter>": unique per process and call.
std::string TempPathFor(const std::string& final_path);

// True when `file_name` (no directory) is a temporary name TempPathFor made
// for some final file in the same directory.
bool IsTempFileName(std::string_view file_name);

// Writes through `write(tmp_path)`; see the file comment. Creates missing
// parent directories of `path`. Errors: write's own Status, or kInternal for
// an fsync / rename failure (naming the path); kUnavailable when another
// writer removed the temporary file and no final file exists.
Status WriteAtomically(const std::string& path,
                       const std::function<Status(const std::string& tmp_path)>& write,
                       const AtomicWriteFaults& faults = {});

// Writes `bytes` to `path` atomically.
Status WriteFileAtomically(const std::string& path, std::string_view bytes,
                           const AtomicWriteFaults& faults = {});

// Deletes every temporary file of `path` (see above); returns how many were
// removed. A missing directory is not an error.
Result<int64_t> RemoveStaleTemps(const std::string& path);

// RemoveStaleTemps for many final paths, listing each of their directories
// once (a chunk's outputs usually share a folder of many files).
Result<int64_t> RemoveStaleTempsOf(const std::vector<std::string>& paths);

// fsync of a file, or of a directory (its entries), by path. kInternal
// naming the path when it cannot be opened or synced.
Status FsyncPath(const std::string& path, bool directory);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_ATOMIC_OUTPUT_H_
