// The scalars of a YAML config file (tesserad's config, the agent's
// inventory, the Slurm pool's GPU types), read with one error wording: a
// value of the wrong kind is kInvalidArgument naming `field` and quoting what
// was there ("must be a finite number, got 'fast'").
//
// Thread safety: pure functions.
#ifndef TESSERA_COMMON_YAML_SCALARS_H_
#define TESSERA_COMMON_YAML_SCALARS_H_

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tessera {

// The YAML (or JSON) document in `text`; kInvalidArgument "not valid YAML:
// <where and why>" when it does not parse.
Result<YAML::Node> YamlParse(std::string_view text);

// A scalar's text.
Result<std::string> YamlString(const YAML::Node& node, const std::string& field);
// A finite number.
Result<double> YamlNumber(const YAML::Node& node, const std::string& field);
// true or false (YAML's spellings: true/false, yes/no, on/off).
Result<bool> YamlBool(const YAML::Node& node, const std::string& field);
// A sequence of scalars.
Result<std::vector<std::string>> YamlStringList(const YAML::Node& node, const std::string& field);

}  // namespace tessera

#endif  // TESSERA_COMMON_YAML_SCALARS_H_
