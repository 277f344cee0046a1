#include "launch/rank_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

namespace tessera::launch {
namespace {

// The last `max_bytes` of the file (all of it when shorter); empty when it
// cannot be read. (A partial read of a growing file: not a whole-file read,
// so not through common/file_system.h.)
std::string ReadFileTail(const std::filesystem::path& path, int64_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  off_t size = ::lseek(fd, 0, SEEK_END);
  if (size <= 0) {
    ::close(fd);
    return {};
  }
  off_t start = size > max_bytes ? size - max_bytes : 0;
  std::string out(static_cast<size_t>(size - start), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::pread(fd, out.data() + got, out.size() - got, start + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

std::vector<std::string> SplitLines(const std::string& text, bool drop_first_partial) {
  std::vector<std::string> lines;
  size_t pos = 0;
  if (drop_first_partial) {
    size_t nl = text.find('\n');
    pos = nl == std::string::npos ? text.size() : nl + 1;
  }
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) {
      lines.push_back(text.substr(pos));
      break;
    }
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return lines;
}

std::filesystem::path Numbered(const std::filesystem::path& log, int i) {
  std::filesystem::path p = log;
  p += "." + std::to_string(i);
  return p;
}

}  // namespace

RankPaths RankPathsFor(const std::filesystem::path& state_dir, const api::WorkerKey& key) {
  RankPaths p;
  p.dir = state_dir / "jobs" / std::to_string(key.job_id) / std::to_string(key.attempt) /
          ("rank-" + std::to_string(key.rank));
  p.plan = p.dir / "plan.json";
  p.reform = p.dir / "reform.json";
  p.progress = p.dir / "progress.jsonl";
  p.log = p.dir / "worker.log";
  p.pid = p.dir / "worker.pid";
  p.exit = p.dir / "exit.json";
  return p;
}

Status CreateRankDir(const std::filesystem::path& state_dir, const RankPaths& paths,
                     const RankDirAccess& access) {
  namespace fs = std::filesystem;
  // group < 0: keep the folder's group.
  auto make = [](const fs::path& dir, mode_t mode, int64_t group) -> Status {
    if (::mkdir(dir.c_str(), mode) != 0 && errno != EEXIST) {
      return Internal("cannot create " + dir.string() + ": " + std::strerror(errno));
    }
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return Internal(dir.string() + " is not a folder");
    }
    if (group >= 0 &&
        ::chown(dir.c_str(), static_cast<uid_t>(-1), static_cast<gid_t>(group)) != 0) {
      return Internal("cannot hand " + dir.string() + " to group " + std::to_string(group) + ": " +
                      std::strerror(errno));
    }
    if (::chmod(dir.c_str(), mode) != 0) {
      return Internal("cannot set the mode of " + dir.string() + ": " + std::strerror(errno));
    }
    return Status::Ok();
  };
  std::error_code ec;
  fs::create_directories(state_dir, ec);
  const fs::path jobs = state_dir / "jobs";
  if (access.other_account) {
    // Search permission only: the worker reaches its own folder by name.
    struct stat st {};
    if (::stat(state_dir.c_str(), &st) == 0) ::chmod(state_dir.c_str(), (st.st_mode & 07777) | 011);
    TESSERA_RETURN_IF_ERROR(make(jobs, 0711, -1));
  } else {
    if (::mkdir(jobs.c_str(), 0700) != 0 && errno != EEXIST) {
      return Internal("cannot create " + jobs.string() + ": " + std::strerror(errno));
    }
  }
  const fs::path attempt = paths.dir.parent_path();
  const fs::path job = attempt.parent_path();
  const mode_t mode = access.other_account ? 0710 : 0700;
  const int64_t group = access.other_account ? static_cast<int64_t>(access.group) : -1;
  for (const fs::path& dir : {job, attempt, paths.dir}) {
    TESSERA_RETURN_IF_ERROR(make(dir, mode, group));
  }
  return Status::Ok();
}

std::vector<std::string> ReadLogTail(const std::filesystem::path& log, size_t max_lines,
                                     size_t max_line_bytes, size_t max_total_bytes) {
  // Enough bytes for max_lines average lines; long lines are cut anyway.
  const int64_t window = static_cast<int64_t>(max_lines * 512 + max_line_bytes);
  std::vector<std::string> lines;
  for (int generation = 0; generation < 2 && lines.size() < max_lines; ++generation) {
    std::filesystem::path file = generation == 0 ? log : Numbered(log, 1);
    std::string text = ReadFileTail(file, window);
    std::error_code ec;
    auto size = std::filesystem::file_size(file, ec);
    bool truncated_front = !ec && static_cast<int64_t>(size) > window;
    std::vector<std::string> part = SplitLines(text, truncated_front);
    // Older lines go in front of what we have.
    size_t want = max_lines - lines.size();
    size_t from = part.size() > want ? part.size() - want : 0;
    lines.insert(lines.begin(), part.begin() + static_cast<std::ptrdiff_t>(from), part.end());
  }
  size_t total = 0;
  for (auto& line : lines) {
    while (!line.empty() && line.back() == '\r') line.pop_back();
    if (auto cr = line.rfind('\r'); cr != std::string::npos) line.erase(0, cr + 1);
    if (line.size() > max_line_bytes) line.resize(max_line_bytes);
    total += line.size() + 1;
  }
  size_t drop = 0;
  while (drop < lines.size() && total > max_total_bytes) total -= lines[drop++].size() + 1;
  lines.erase(lines.begin(), lines.begin() + static_cast<std::ptrdiff_t>(drop));
  return lines;
}

api::Json ReadLastProgress(const std::filesystem::path& progress) {
  std::string text = ReadFileTail(progress, 64 * 1024);
  // Only newline-terminated lines are complete.
  size_t end = text.rfind('\n');
  while (end != std::string::npos && end > 0) {
    size_t begin = text.rfind('\n', end - 1);
    size_t start = begin == std::string::npos ? 0 : begin + 1;
    api::Json j = api::Json::parse(text.substr(start, end - start), nullptr,
                                   /*allow_exceptions=*/false);
    if (!j.is_discarded() && !(start == 0 && text.size() >= 64 * 1024)) return j;
    if (begin == std::string::npos) break;
    end = begin;
  }
  return nullptr;
}

std::vector<api::Json> ReadProgressLines(const std::filesystem::path& progress, size_t max_lines) {
  constexpr int64_t kWindow = 64 * 1024;
  const std::string text = ReadFileTail(progress, kWindow);
  std::vector<api::Json> newest_first;
  // Only newline-terminated lines are complete; a line cut by the window
  // start is not.
  size_t end = text.rfind('\n');
  while (end != std::string::npos && end > 0 && newest_first.size() < max_lines) {
    const size_t begin = text.rfind('\n', end - 1);
    const size_t start = begin == std::string::npos ? 0 : begin + 1;
    if (!(start == 0 && static_cast<int64_t>(text.size()) >= kWindow)) {
      api::Json j = api::Json::parse(text.substr(start, end - start), nullptr,
                                     /*allow_exceptions=*/false);
      if (!j.is_discarded() && j.is_object()) newest_first.push_back(std::move(j));
    }
    if (begin == std::string::npos) break;
    end = begin;
  }
  return std::vector<api::Json>(newest_first.rbegin(), newest_first.rend());
}

bool RotateLogIfNeeded(const std::filesystem::path& log, int64_t max_bytes, int keep) {
  struct stat st {};
  if (max_bytes <= 0 || ::stat(log.c_str(), &st) != 0 || st.st_size <= max_bytes) return false;
  std::error_code ec;
  if (keep > 0) {
    std::filesystem::remove(Numbered(log, keep), ec);
    for (int i = keep - 1; i >= 1; --i) {
      std::filesystem::rename(Numbered(log, i), Numbered(log, i + 1), ec);
    }
    std::filesystem::copy_file(log, Numbered(log, 1),
                               std::filesystem::copy_options::overwrite_existing, ec);
  }
  // The worker writes with O_APPEND, so after truncation it continues at 0.
  return ::truncate(log.c_str(), 0) == 0;
}

}  // namespace tessera::launch
