#include "worker/runtime/staged_outputs.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

namespace tessera::worker {
namespace fs = std::filesystem;

Status StagedOutputs::Stage(const std::string& path,
                            const std::function<Status(const std::string& tmp_path)>& write) {
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Internal("creating " + dir.string() + ": " + ec.message());
  const std::string tmp = TempPathFor(path);
  Status written = write(tmp);
  if (!written.ok()) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    return written;
  }
  if (faults_) TESSERA_RETURN_IF_ERROR(faults_(AtomicWriteStep::kAfterWrite, tmp));
  std::lock_guard<std::mutex> lock(mu_);
  staged_.push_back({path, tmp});
  return Status::Ok();
}

Result<StagedOutputs::Committed> StagedOutputs::Commit() {
  std::vector<Entry> entries;
  {
    std::lock_guard<std::mutex> lock(mu_);
    entries.swap(staged_);
  }
  Committed out;
  std::vector<bool> present(entries.size(), true);
  for (size_t i = 0; i < entries.size(); ++i) {
    Status s = FsyncPath(entries[i].tmp, /*directory=*/false);
    if (!s.ok()) {
      std::error_code ec;
      if (fs::exists(entries[i].tmp, ec)) return s;
      present[i] = false;  // removed by another writer: decided at the rename
    }
  }
  std::set<std::string> dirs;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    if (faults_) TESSERA_RETURN_IF_ERROR(faults_(AtomicWriteStep::kAfterSync, e.tmp));
    if (!present[i] || ::rename(e.tmp.c_str(), e.path.c_str()) != 0) {
      const int err = present[i] ? errno : ENOENT;
      std::error_code ec;
      if (err == ENOENT) {
        if (fs::exists(e.path, ec)) {
          ++out.written;
        } else {
          out.lost.push_back(e.path);
        }
        continue;
      }
      fs::remove(e.tmp, ec);
      return Internal("renaming " + e.tmp + " to " + e.path + ": " + std::strerror(err));
    }
    if (faults_) TESSERA_RETURN_IF_ERROR(faults_(AtomicWriteStep::kAfterRename, e.tmp));
    ++out.written;
    fs::path dir = fs::path(e.path).parent_path();
    dirs.insert(dir.empty() ? "." : dir.string());
  }
  for (const std::string& dir : dirs) {
    TESSERA_RETURN_IF_ERROR(FsyncPath(dir, /*directory=*/true));
  }
  return out;
}

size_t StagedOutputs::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return staged_.size();
}

}  // namespace tessera::worker
