// StagedOutputs: the outputs of one chunk of inference, written to temporary
// files as they are produced and made final together, so that a chunk costs
// one round of fsyncs instead of two per output.
//
// Stage(path, write) writes one output to a temporary name next to `path`
// (TempPathFor of common/atomic_file.h, so crash leftovers are recognised and
// removed by RemoveStaleTemps of atomic_output.h) without syncing it. Commit():
//   1. fsyncs every staged temporary file (the file system can flush them
//      together);
//   2. renames each over its final path;
//   3. fsyncs each directory that received an output, once.
// An output appears at its final path only complete, as with
// WriteFileAtomically: "output exists" still means "output complete", which is
// what lets a redone chunk skip the outputs already written. The chunk may be
// reported done only after Commit returned: a crash before leaves temporary
// files (removed when the chunk is done again) and unrenamed outputs.
//
// A staged temporary file that vanished before its rename (another writer of
// the same item, whose lease overlapped ours, removed it as stale) counts as
// committed when its final file exists (the other writer wrote the same
// bytes) and as lost otherwise: Commit reports lost outputs instead of
// failing, and the caller must not report their chunk done.
//
// Fault injection: `faults` is called after each write (kAfterWrite), after
// the fsync round for each file before its rename (kAfterSync) and after each
// rename (kAfterRename); a non-OK Status stops right there without cleaning
// up, which is what a crash at that point leaves on disk.
//
// Every fsync, rename and removal goes through `files`
// (common/file_system.h, not owned), so a test can make them fail.
//
// Thread safety: Stage may be called from several threads at once; Commit
// once, after every Stage call returned.
#ifndef TESSERA_WORKER_RUNTIME_STAGED_OUTPUTS_H_
#define TESSERA_WORKER_RUNTIME_STAGED_OUTPUTS_H_

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "common/atomic_file.h"
#include "common/file_system.h"
#include "common/status.h"
#include "worker/runtime/atomic_output.h"

namespace tessera::worker {

class StagedOutputs {
 public:
  explicit StagedOutputs(AtomicWriteFaults faults = {}, FileSystem* files = FileSystem::Default())
      : faults_(std::move(faults)), files_(files) {}

  // Writes one output through write(tmp_path) to a temporary file next to
  // `path`, creating missing parent directories. A failed write removes its
  // temporary file and returns write's Status (kInternal for a directory that
  // cannot be created).
  Status Stage(const std::string& path,
               const std::function<Status(const std::string& tmp_path)>& write);

  struct Committed {
    int64_t written = 0;            // outputs now at their final paths
    std::vector<std::string> lost;  // final paths whose temporary file vanished
  };
  // Makes every staged output final (see the file comment). The failed
  // call's Status (common/file_system.h, naming the path) for an fsync or
  // rename failure.
  Result<Committed> Commit();

  // Staged outputs not committed yet.
  size_t size() const;

 private:
  struct Entry {
    std::string path, tmp;
  };
  AtomicWriteFaults faults_;
  FileSystem* const files_;
  mutable std::mutex mu_;
  std::vector<Entry> staged_;
};

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_STAGED_OUTPUTS_H_
