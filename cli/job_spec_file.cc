#include "cli/job_spec_file.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <iostream>
#include <sstream>

#include "common/file_system.h"

namespace tessera::cli {
namespace {

api::Json ScalarToJson(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return s;  // quoted: always a string
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (s == "null" || s == "~" || s.empty()) return nullptr;
  int64_t i = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), i);
  if (ec == std::errc() && ptr == s.data() + s.size()) return i;
  double d = 0;
  auto [dptr, dec] = std::from_chars(s.data(), s.data() + s.size(), d);
  if (dec == std::errc() && dptr == s.data() + s.size()) return d;
  return s;
}

api::Json NodeToJson(const YAML::Node& node, int depth) {
  if (depth > 64) throw YAML::Exception(YAML::Mark::null_mark(), "nested too deeply");
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return ScalarToJson(node);
    case YAML::NodeType::Sequence: {
      api::Json out = api::Json::array();
      for (const auto& item : node) out.push_back(NodeToJson(item, depth + 1));
      return out;
    }
    case YAML::NodeType::Map: {
      api::Json out = api::Json::object();
      for (const auto& kv : node) {
        out[kv.first.as<std::string>()] = NodeToJson(kv.second, depth + 1);
      }
      return out;
    }
  }
  return nullptr;
}

bool LooksLikeYaml(const std::string& name, const std::string& text) {
  if (name.ends_with(".yaml") || name.ends_with(".yml")) return true;
  if (name.ends_with(".json")) return false;
  size_t first = text.find_first_not_of(" \t\r\n");
  return first == std::string::npos || text[first] != '{';
}

}  // namespace

Result<api::Json> YamlTextToJson(const std::string& text) {
  try {
    return NodeToJson(YAML::Load(text), 0);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("not valid YAML: ") + e.what(), "file");
  }
}

Result<api::JobSpec> ParseJobSpecText(const std::string& text, const std::string& name) {
  api::Json j;
  if (LooksLikeYaml(name, text)) {
    TESSERA_ASSIGN_OR_RETURN(j, YamlTextToJson(text));
  } else {
    j = api::Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return InvalidArgument(name + ": not valid JSON", "file");
  }
  return api::JobSpecFromJson(j);
}

Result<api::JobSpec> LoadJobSpecFile(const std::string& path) {
  std::ostringstream buf;
  if (path == "-") {
    buf << std::cin.rdbuf();
  } else {
    Result<std::string> text = FileSystem::Default()->ReadFile(path);
    if (!text.ok()) return InvalidArgument("cannot read " + path, "file");
    buf << *text;
  }
  return ParseJobSpecText(buf.str(), path);
}

}  // namespace tessera::cli
