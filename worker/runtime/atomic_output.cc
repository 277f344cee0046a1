#include "worker/runtime/atomic_output.h"

#include <filesystem>
#include <map>
#include <set>

namespace tessera::worker {
namespace fs = std::filesystem;

namespace {

// Removes the temporary files in `dir` of the final names in `names`.
Result<int64_t> RemoveTempsIn(const fs::path& dir, const std::set<std::string>& names) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return int64_t{0};
  int64_t removed = 0;
  fs::directory_iterator it(dir, ec);
  if (ec) return Internal("listing " + dir.string() + ": " + ec.message());
  for (const fs::directory_entry& e : it) {
    const std::string name = e.path().filename().string();
    if (!IsTempFileName(name)) continue;
    // ".<final>.tmp-<pid>-<n>": the final name is between the dot and the
    // last marker (a final name may itself hold ".tmp-").
    const size_t at = name.rfind(".tmp-");
    if (names.count(name.substr(1, at - 1)) == 0) continue;
    std::error_code rm;
    if (fs::remove(e.path(), rm)) ++removed;
    if (rm && rm != std::errc::no_such_file_or_directory) {
      return Internal("removing " + e.path().string() + ": " + rm.message());
    }
  }
  return removed;
}

}  // namespace

Result<int64_t> RemoveStaleTemps(const std::string& path) { return RemoveStaleTempsOf({path}); }

Result<int64_t> RemoveStaleTempsOf(const std::vector<std::string>& paths) {
  std::map<fs::path, std::set<std::string>> by_dir;
  for (const std::string& p : paths) {
    const fs::path final_path(p);
    fs::path dir = final_path.parent_path();
    if (dir.empty()) dir = ".";
    by_dir[dir].insert(final_path.filename().string());
  }
  int64_t removed = 0;
  for (const auto& [dir, names] : by_dir) {
    TESSERA_ASSIGN_OR_RETURN(int64_t n, RemoveTempsIn(dir, names));
    removed += n;
  }
  return removed;
}

}  // namespace tessera::worker
