#include "worker/runtime/staged_outputs.h"

#include <filesystem>
#include <set>

namespace tessera::worker {
namespace fs = std::filesystem;

Status StagedOutputs::Stage(const std::string& path,
                            const std::function<Status(const std::string& tmp_path)>& write) {
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  TESSERA_RETURN_IF_ERROR(files_->CreateDirs(dir));
  const std::string tmp = TempPathFor(path);
  Status written = write(tmp);
  if (!written.ok()) {
    files_->Remove(tmp).IgnoreError();  // it may not exist
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
    Status s = files_->SyncFile(entries[i].tmp);
    if (!s.ok()) {
      if (files_->Exists(entries[i].tmp)) return s;
      present[i] = false;  // removed by another writer: decided at the rename
    }
  }
  std::set<std::string> dirs;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    if (faults_) TESSERA_RETURN_IF_ERROR(faults_(AtomicWriteStep::kAfterSync, e.tmp));
    Status renamed = present[i] ? files_->Rename(e.tmp, e.path) : Status::Ok();
    if (!present[i] || !renamed.ok()) {
      if (!present[i] || !files_->Exists(e.tmp)) {
        // Another writer of the same item removed our temporary file.
        if (files_->Exists(e.path)) {
          ++out.written;
        } else {
          out.lost.push_back(e.path);
        }
        continue;
      }
      files_->Remove(e.tmp).IgnoreError();
      return renamed;
    }
    if (faults_) TESSERA_RETURN_IF_ERROR(faults_(AtomicWriteStep::kAfterRename, e.tmp));
    ++out.written;
    fs::path dir = fs::path(e.path).parent_path();
    dirs.insert(dir.empty() ? "." : dir.string());
  }
  for (const std::string& dir : dirs) {
    TESSERA_RETURN_IF_ERROR(files_->SyncDir(dir));
  }
  return out;
}

size_t StagedOutputs::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return staged_.size();
}

}  // namespace tessera::worker
