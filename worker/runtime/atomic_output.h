// Atomic outputs of the worker: a file appears at its final path complete or
// not at all, even if the process is killed (kill -9, power loss) at any
// moment.
//
// One output is written with WriteFileAtomically of common/atomic_file.h
// (temporary file "<dir>/.<name>.tmp-<pid>-<n>", fsync, rename, fsync of the
// folder) with `shared_writer` set: two ranks whose leases overlapped may
// write the same item at once. A chunk's outputs go through StagedOutputs
// (staged_outputs.h), one round of fsyncs for all. Crash points are
// simulated with AtomicWriteFaults (common/atomic_file.h).
//
// RemoveStaleTemps(path) deletes the temporary files a crashed writer of
// `path` left behind (call it before writing `path`, never while this
// process is writing it: a restarted process may reuse a pid, so its own
// pid is not spared). If two processes write the same path at once, one may
// delete the other's temporary file; the loser's rename then fails, and the
// write counts as done when the final file exists (the winner wrote the same
// bytes), kUnavailable otherwise.
//
// Thread safety: functions are safe to call concurrently for different
// paths.
#ifndef TESSERA_WORKER_RUNTIME_ATOMIC_OUTPUT_H_
#define TESSERA_WORKER_RUNTIME_ATOMIC_OUTPUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/atomic_file.h"
#include "common/status.h"

namespace tessera::worker {

// Deletes every temporary file of `path` (see above); returns how many were
// removed. A missing directory is not an error.
Result<int64_t> RemoveStaleTemps(const std::string& path);

// RemoveStaleTemps for many final paths, listing each of their directories
// once (a chunk's outputs usually share a folder of many files).
Result<int64_t> RemoveStaleTempsOf(const std::vector<std::string>& paths);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_ATOMIC_OUTPUT_H_
