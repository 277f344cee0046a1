// BenchmarkCache: measured device figures kept in <state>/inventory-cache.json
// so an agent restart reuses them instead of measuring again (--rebenchmark
// forces a new measurement).
//
// Entries are keyed by a device's identity ("cuda:<uuid>", "cpu:<model
// name>"), so a swapped GPU is measured afresh. The file is read and written
// through a FileSystem (common/file_system.h), not owned.
// Thread safety: not thread-safe; the agent loop owns it.
#ifndef TESSERA_AGENT_BENCHMARK_CACHE_H_
#define TESSERA_AGENT_BENCHMARK_CACHE_H_

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "agent/device_benchmark.h"
#include "api/types.h"
#include "common/file_system.h"
#include "common/status.h"

namespace tessera::agent {

class BenchmarkCache {
 public:
  // The cache file path; an empty path keeps the cache in memory only.
  explicit BenchmarkCache(std::filesystem::path file, FileSystem* fs = FileSystem::Default());

  // Reads the file; a missing or unreadable file gives an empty cache (the
  // agent measures again), never an error.
  void Load();
  // Writes atomically (WriteFileAtomically of common/atomic_file.h); its
  // error, naming the file, when that fails (the file then keeps its
  // previous content).
  Status Save() const;

  std::optional<BenchmarkFigures> Get(const std::string& key) const;
  void Put(const std::string& key, const BenchmarkFigures& figures);
  // A layer profile measured on a device (kept in the file's "profiles").
  std::optional<api::Json> GetProfile(const std::string& key) const;
  void PutProfile(const std::string& key, api::Json profile);

  // Cache key of a (non-emulated) device.
  static std::string KeyFor(const api::Device& device);

 private:
  std::filesystem::path file_;
  FileSystem* fs_;
  std::map<std::string, BenchmarkFigures> entries_;
  std::map<std::string, api::Json> profiles_;
};

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_BENCHMARK_CACHE_H_
