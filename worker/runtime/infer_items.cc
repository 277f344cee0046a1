#include "worker/runtime/infer_items.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <sstream>

#include "common/file_system.h"

namespace tessera::worker {
namespace fs = std::filesystem;
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool IsImageName(const fs::path& p) {
  const std::string ext = Lower(p.extension().string());
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

}  // namespace

std::string DataRoot(const std::string& data) {
  std::error_code ec;
  if (fs::is_directory(data, ec)) return data;
  fs::path parent = fs::path(data).parent_path();
  return parent.empty() ? "." : parent.string();
}

Result<std::vector<std::string>> ListInputItems(const std::string& data,
                                                const std::string& exclude_dir) {
  std::error_code ec;
  if (data.empty()) return InvalidArgument("an input folder or list file is required", "data");
  if (!fs::exists(data, ec)) return InvalidArgument("input " + data + " does not exist", "data");
  std::vector<std::string> items;
  if (fs::is_directory(data, ec)) {
    const fs::path root(data);
    fs::path exclude;
    if (!exclude_dir.empty()) exclude = fs::weakly_canonical(exclude_dir, ec);
    fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
    if (ec)
      return InvalidArgument("cannot read input folder " + data + ": " + ec.message(), "data");
    for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) {
        return InvalidArgument("cannot read input folder " + data + ": " + ec.message(), "data");
      }
      const fs::path& p = it->path();
      const std::string name = p.filename().string();
      if (it->is_directory(ec)) {
        std::error_code cec;
        const bool excluded = !exclude.empty() && fs::weakly_canonical(p, cec) == exclude;
        if (excluded || (!name.empty() && name[0] == '.')) it.disable_recursion_pending();
        continue;
      }
      if (name.empty() || name[0] == '.' || !IsImageName(p)) continue;
      items.push_back(p.lexically_relative(root).generic_string());
    }
    std::sort(items.begin(), items.end());
  } else {
    Result<std::string> list = FileSystem::Default()->ReadFile(data);
    if (!list.ok()) return InvalidArgument("cannot read list file " + data, "data");
    std::istringstream in(*list);
    std::string line;
    while (std::getline(in, line)) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      const size_t start = line.find_first_not_of(" \t");
      if (start == std::string::npos || line[start] == '#') continue;
      items.push_back(line.substr(start));
    }
  }
  if (items.empty()) return InvalidArgument("no images in " + data, "data");
  return items;
}

Result<std::string> OutputPathFor(const std::string& output_dir, const std::string& data_root,
                                  const std::string& item, const std::string& extension) {
  if (item.empty()) return InvalidArgument("empty item", "item");
  fs::path p(item);
  if (p.is_absolute()) {
    const fs::path rel =
        p.lexically_normal().lexically_relative(fs::path(data_root).lexically_normal());
    const std::string first = rel.empty() ? std::string() : rel.begin()->string();
    if (!rel.empty() && first != ".." && !data_root.empty() && fs::path(data_root).is_absolute()) {
      p = rel;
    } else {
      p = p.relative_path();
    }
  }
  p = p.lexically_normal();
  if (p.empty() || p == "." || p.begin()->string() == ".." || p.filename().empty()) {
    return InvalidArgument("item \"" + item + "\" leaves the output folder", "item");
  }
  std::string name = p.generic_string();
  if (Lower(p.extension().string()) != extension) name += extension;
  return (fs::path(output_dir) / name).string();
}

}  // namespace tessera::worker
