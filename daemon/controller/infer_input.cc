#include "daemon/controller/infer_input.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace tessera::daemon {
namespace {

namespace fs = std::filesystem;

bool IsImageName(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (std::string_view ext : {".png", ".jpg", ".jpeg"}) {
    if (lower.size() > ext.size() && lower.ends_with(ext)) return true;
  }
  return false;
}

bool HasDotDot(const std::string& item) {
  for (const fs::path& part : fs::path(item)) {
    if (part == "..") return true;
  }
  return false;
}

Status Refused(const Status& why, const std::string& what) {
  return InvalidArgument(what + ": " + why.message(), "dataset");
}

using Emit = std::function<Status(std::string item)>;

Status ListFolder(const fs::path& root, const InputPathCheck& may_read, const Emit& emit) {
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::none, ec), end;
  if (ec)
    return InvalidArgument("cannot read folder " + root.string() + ": " + ec.message(), "dataset");
  for (; it != end; it.increment(ec)) {
    if (ec) {
      return InvalidArgument("cannot read below " + root.string() + ": " + ec.message(), "dataset");
    }
    const std::string name = it->path().filename().string();
    if (name.starts_with(".")) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(ec) || !IsImageName(name)) continue;
    // A symlink (to a file: folders are not followed) may point out of the
    // roots the job may read.
    if (it->is_symlink(ec)) {
      const std::string relative = it->path().lexically_relative(root).generic_string();
      if (Status st = may_read(it->path().string()); !st.ok()) {
        return Refused(st, "the link " + relative + " in " + root.string());
      }
    }
    TESSERA_RETURN_IF_ERROR(emit(it->path().lexically_relative(root).generic_string()));
  }
  return Status::Ok();
}

Status ListFile(const fs::path& list, const InputPathCheck& may_read, const Emit& emit) {
  std::ifstream in(list);
  if (!in) return InvalidArgument("cannot read list file " + list.string(), "dataset");
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    size_t start = 0;
    while (start < line.size() && std::isspace(static_cast<unsigned char>(line[start]))) ++start;
    line.erase(0, start);
    if (line.empty() || line.front() == '#') continue;
    if (HasDotDot(line)) {
      return InvalidArgument("line " + std::to_string(number) + " of " + list.string() +
                                 ": \"..\" is not allowed in an input path",
                             "dataset");
    }
    // Items are checked as the paths the worker will open. Their text is
    // input content: messages name the line, never quote it.
    const fs::path absolute =
        line.front() == '/' ? fs::path(line) : list.parent_path() / fs::path(line);
    const std::string where = "line " + std::to_string(number) + " of " + list.string();
    if (Status st = may_read(absolute.lexically_normal().string()); !st.ok()) {
      return InvalidArgument(where + ": not an image the job may read", "dataset");
    }
    std::error_code ec;
    if (!fs::is_regular_file(absolute, ec)) {
      return InvalidArgument(where + ": not an existing image file", "dataset");
    }
    TESSERA_RETURN_IF_ERROR(emit(line));
  }
  return Status::Ok();
}

}  // namespace

Status AnyPath(const std::string&) { return Status::Ok(); }

Status ForEachInferInput(const std::string& dataset, const InputPathCheck& may_read,
                         const std::function<Status(std::string item)>& emit) {
  if (Status st = may_read(dataset); !st.ok()) return Refused(st, "input " + dataset);
  std::error_code ec;
  const fs::path path(dataset);
  const fs::file_status status = fs::status(path, ec);
  int64_t found = 0;
  auto counted = [&](std::string item) {
    ++found;
    return emit(std::move(item));
  };
  if (fs::is_directory(status)) {
    TESSERA_RETURN_IF_ERROR(ListFolder(path, may_read, counted));
  } else if (fs::is_regular_file(status)) {
    TESSERA_RETURN_IF_ERROR(ListFile(path, may_read, counted));
  } else {
    return InvalidArgument("input " + dataset + " is neither a folder nor a list file", "dataset");
  }
  if (found == 0) return InvalidArgument("no images found in " + dataset, "dataset");
  return Status::Ok();
}

Status CheckInferInputHead(const std::string& dataset, const InputPathCheck& may_read,
                           int64_t max_items) {
  int64_t checked = 0;
  bool enough = false;
  Status st = ForEachInferInput(dataset, may_read, [&](std::string) -> Status {
    if (++checked < max_items) return Status::Ok();
    enough = true;
    return Unavailable("enough items checked");  // stops the listing here; never returned
  });
  return enough ? Status::Ok() : st;
}

Result<std::vector<std::string>> ListInferInputs(const std::string& dataset,
                                                 const InputPathCheck& may_read) {
  std::vector<std::string> items;
  TESSERA_RETURN_IF_ERROR(ForEachInferInput(dataset, may_read, [&](std::string item) {
    items.push_back(std::move(item));
    return Status::Ok();
  }));
  // A folder's items in byte order (a list file keeps its own order).
  if (fs::is_directory(fs::path(dataset))) std::sort(items.begin(), items.end());
  return items;
}

std::vector<std::vector<std::string>> SplitIntoChunks(const std::vector<std::string>& items,
                                                      int64_t chunk_size) {
  std::vector<std::vector<std::string>> chunks;
  const auto size = static_cast<size_t>(std::max<int64_t>(chunk_size, 1));
  for (size_t i = 0; i < items.size(); i += size) {
    chunks.emplace_back(
        items.begin() + static_cast<std::ptrdiff_t>(i),
        items.begin() + static_cast<std::ptrdiff_t>(std::min(i + size, items.size())));
  }
  return chunks;
}

}  // namespace tessera::daemon
