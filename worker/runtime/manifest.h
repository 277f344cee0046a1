// Checkpoint manifest: the pure part of checkpointing.
//
// A checkpoint is a directory <dir>/step-<N>/ holding tensor files written by
// the ranks that own the tensors, and a manifest.json written LAST by rank 0
// (tmp file, fsync, rename, fsync dir). The manifest lists every file with its
// size and SHA-256 and the tensor names ("<layer>.<param>", optimizer state
// "<layer>.<param>#momentum", ...) each file holds, so a reader with any other
// layout finds the tensors of the layers it owns by name.
//
// A reader takes the newest manifest whose files are all present with the
// listed size and hash; anything else is an unfinished or damaged write and is
// ignored. Pure: the filesystem is reached only through the FileProbe passed
// in. Thread safety: values.
#ifndef TESSERA_WORKER_RUNTIME_MANIFEST_H_
#define TESSERA_WORKER_RUNTIME_MANIFEST_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tessera::worker {

struct ManifestFile {
  std::string path;  // relative to the step directory
  uint64_t size = 0;
  std::string sha256;  // lower-case hex; empty = not checked
  std::vector<std::string> tensors;
  friend bool operator==(const ManifestFile&, const ManifestFile&) = default;
};

struct Manifest {
  int64_t step = 0;          // optimizer steps completed
  int64_t samples_seen = 0;  // step * global_batch for a fixed global batch
  int64_t global_batch = 0;
  std::string model;
  std::string layout;  // layout that wrote it (informational)
  std::vector<ManifestFile> files;
  friend bool operator==(const Manifest&, const Manifest&) = default;
};

std::string ManifestToJson(const Manifest& manifest);
Result<Manifest> ManifestFromJson(std::string_view text);

// "step-<N>"; ParseStepDirName returns nullopt for any other name.
std::string StepDirName(int64_t step);
std::optional<int64_t> ParseStepDirName(std::string_view name);

// What the filesystem says about one file of a step.
struct FileFacts {
  uint64_t size = 0;
  std::string sha256;  // filled only when asked for
};
// (step, relative path, want_hash) -> facts, or nullopt if the file is absent.
using FileProbe =
    std::function<std::optional<FileFacts>(int64_t step, const std::string& path, bool want_hash)>;

// One step directory found on disk; manifest_json is nullopt when it has no
// manifest (an unfinished write).
struct ManifestCandidate {
  int64_t step = 0;
  std::optional<std::string> manifest_json;
};

// Why a file or manifest fails; empty string = complete.
std::string CheckManifestFiles(const Manifest& manifest, const FileProbe& probe);

struct Selection {
  std::optional<Manifest> chosen;    // newest complete, or nullopt
  std::vector<std::string> skipped;  // "step-12: layers-0-7.bin missing", newest first
};
Selection SelectNewestComplete(std::vector<ManifestCandidate> candidates, const FileProbe& probe);

// Where each tensor lives: name -> file path. kInvalidArgument if a name is
// listed twice (two writers for one tensor).
Result<std::vector<std::pair<std::string, std::string>>> TensorLocations(const Manifest& manifest);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_MANIFEST_H_
