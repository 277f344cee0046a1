#include "daemon/infer_input.h"

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

Result<std::vector<std::string>> ListFolder(const fs::path& root) {
  std::vector<std::string> items;
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
    items.push_back(it->path().lexically_relative(root).generic_string());
  }
  std::sort(items.begin(), items.end());
  return items;
}

Result<std::vector<std::string>> ListFile(const fs::path& list) {
  std::ifstream in(list);
  if (!in) return InvalidArgument("cannot read list file " + list.string(), "dataset");
  std::vector<std::string> items;
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
    items.push_back(line);
  }
  return items;
}

}  // namespace

Result<std::vector<std::string>> ListInferInputs(const std::string& dataset) {
  std::error_code ec;
  const fs::path path(dataset);
  const fs::file_status status = fs::status(path, ec);
  Result<std::vector<std::string>> items = std::vector<std::string>{};
  if (fs::is_directory(status)) {
    items = ListFolder(path);
  } else if (fs::is_regular_file(status)) {
    items = ListFile(path);
  } else {
    return InvalidArgument("input " + dataset + " is neither a folder nor a list file", "dataset");
  }
  if (!items.ok()) return items.status();
  if (items->empty()) return InvalidArgument("no images found in " + dataset, "dataset");
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
