#include "common/yaml_scalars.h"

#include <cmath>
#include <utility>

namespace tessera {
namespace {

// "must be X, got 'text'" (or "got a list/mapping" for a non-scalar).
Status WrongKind(const YAML::Node& node, const std::string& want, const std::string& field) {
  const std::string got = node.IsScalar()     ? "'" + node.Scalar() + "'"
                          : node.IsNull()     ? "nothing"
                          : node.IsSequence() ? "a list"
                                              : "a mapping";
  return InvalidArgument("must be " + want + ", got " + got, field);
}

}  // namespace

Result<YAML::Node> YamlParse(std::string_view text) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("not valid YAML: ") + e.what());
  }
}

Result<std::string> YamlString(const YAML::Node& node, const std::string& field) {
  if (!node.IsScalar()) return WrongKind(node, "a string", field);
  return node.Scalar();
}

Result<double> YamlNumber(const YAML::Node& node, const std::string& field) {
  if (node.IsScalar()) {
    try {
      const double v = node.as<double>();
      if (std::isfinite(v)) return v;
    } catch (const YAML::Exception&) {
    }
  }
  return WrongKind(node, "a finite number", field);
}

Result<bool> YamlBool(const YAML::Node& node, const std::string& field) {
  if (node.IsScalar()) {
    try {
      return node.as<bool>();
    } catch (const YAML::Exception&) {
    }
  }
  return WrongKind(node, "true or false", field);
}

Result<std::vector<std::string>> YamlStringList(const YAML::Node& node, const std::string& field) {
  if (!node.IsSequence()) return WrongKind(node, "a list of strings", field);
  std::vector<std::string> out;
  for (size_t i = 0; i < node.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(std::string item,
                             YamlString(node[i], field + "[" + std::to_string(i) + "]"));
    out.push_back(std::move(item));
  }
  return out;
}

}  // namespace tessera
