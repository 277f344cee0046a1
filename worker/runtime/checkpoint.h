// Checkpoint I/O: tensor files, the on-disk side of the manifest, and the
// collective save protocol.
//
// Save (every rank calls SaveCheckpoint at the same step):
//   1. each writer rank writes <dir>/step-<N>/<file> (its owned tensors,
//      keyed "<layer>.<param>", optimizer state "<layer>.<param>#<slot>") and
//      fsyncs it, then publishes {path, size, sha256, tensors} in the store;
//   2. barrier; 3. rank 0 collects every rank's entry and writes
//      manifest.json last (tmp, fsync, rename, fsync dir), then prunes old
//      complete checkpoints beyond `keep`; 4. barrier.
// Load: FindNewestCheckpoint picks the newest step whose manifest's files are
// all present and intact; LoadTensors reads only the files holding the names
// a rank asks for, so a checkpoint written by one layout resumes on any other.
//
// Thread safety: functions are independent; a directory must have one saver.
#ifndef TESSERA_WORKER_RUNTIME_CHECKPOINT_H_
#define TESSERA_WORKER_RUNTIME_CHECKPOINT_H_

#include <torch/torch.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/file_system.h"
#include "common/status.h"
#include "worker/runtime/collectives.h"
#include "worker/runtime/manifest.h"

namespace tessera::worker {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// Binary tensor file: "TSRT1\n", count, then per tensor name, dtype, shape,
// raw bytes (contiguous CPU copy), written and fsynced through `files` (not
// atomic: the manifest, written last, is what makes a checkpoint complete).
// Fills size/sha256/tensors of *facts. The failed write's or fsync's Status,
// naming the path.
Status WriteTensorFile(const std::string& path, const NamedTensors& tensors, ManifestFile* facts,
                       FileSystem* files = FileSystem::Default());
Result<std::map<std::string, torch::Tensor>> ReadTensorFile(const std::string& path);

// Lower-case hex SHA-256 of a file's bytes (OpenSSL).
Result<std::string> Sha256OfFile(const std::string& path);

// The real filesystem behind the pure manifest selection.
FileProbe DiskProbe(const std::string& dir);
std::vector<ManifestCandidate> ScanCheckpointDir(const std::string& dir);
// Newest complete checkpoint, or nullopt; *skipped gets the reasons others lost.
std::optional<Manifest> FindNewestCheckpoint(const std::string& dir,
                                             std::vector<std::string>* skipped);
// Reads <dir>/step-<step>/manifest.json.
Result<Manifest> ReadManifest(const std::string& dir, int64_t step);

// Rank 0 publishes the step it resumes from (`rank0_step`, -1: none; ignored on
// other ranks) through the rendezvous store; every rank returns that step.
Result<int64_t> ShareResumeStep(Collectives& world, int64_t rank0_step);

// Writes <dir>/step-<step>/manifest.json with WriteFileAtomically
// (common/atomic_file.h) through `files`; its error, naming the file, when
// that fails (the step then has no manifest, or keeps its old one).
Status WriteManifestAtomically(const std::string& dir, const Manifest& manifest,
                               FileSystem* files = FileSystem::Default());

// Reads the named tensors from a chosen checkpoint; kNotFound if one is absent.
Result<std::map<std::string, torch::Tensor>> LoadTensors(const std::string& dir,
                                                         const Manifest& manifest,
                                                         const std::vector<std::string>& names);

struct CheckpointContent {
  int64_t step = 0;
  int64_t samples_seen = 0;
  int64_t global_batch = 0;
  std::string model;
  std::string layout;
  std::string file_name;  // empty = this rank writes nothing
  NamedTensors tensors;
};

// Collective; see the protocol above. `keep` complete checkpoints are kept.
Status SaveCheckpoint(Collectives& world, const std::string& dir, const CheckpointContent& content,
                      int keep = 3);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_CHECKPOINT_H_
