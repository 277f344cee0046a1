#include "agent/inventory_file.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

namespace tessera::agent {
namespace {

Result<double> ReadDouble(const YAML::Node& node, const std::string& field) {
  if (!node.IsScalar()) return InvalidArgument("must be a number", field);
  try {
    double v = node.as<double>();
    if (!std::isfinite(v)) return InvalidArgument("must be a finite number", field);
    return v;
  } catch (const YAML::Exception&) {
    return InvalidArgument("must be a number, got '" + node.Scalar() + "'", field);
  }
}

Result<EmulatedDeviceSpec> ReadDevice(const YAML::Node& node, const std::string& prefix) {
  if (!node.IsMap()) return InvalidArgument("must be a mapping", prefix);
  EmulatedDeviceSpec spec;
  bool have_name = false;
  bool have_memory = false;
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    const std::string field = prefix + "." + key;
    const YAML::Node& value = kv.second;
    if (key == "name") {
      if (!value.IsScalar() || value.Scalar().empty()) {
        return InvalidArgument("must be a non-empty string", field);
      }
      spec.name = value.Scalar();
      have_name = true;
    } else if (key == "memory") {
      if (!value.IsScalar()) return InvalidArgument("must be a byte size like 16GiB", field);
      auto bytes = ParseByteSize(value.Scalar());
      if (!bytes || *bytes <= 0) {
        return InvalidArgument(
            "must be a positive byte size like 16GiB, got '" + value.Scalar() + "'", field);
      }
      spec.memory_bytes = *bytes;
      have_memory = true;
    } else if (key == "relative_speed") {
      TESSERA_ASSIGN_OR_RETURN(double speed, ReadDouble(value, field));
      if (speed <= 0 || speed > 1000) return InvalidArgument("must be in (0, 1000]", field);
      spec.relative_speed = speed;
    } else if (key == "tflops") {
      TESSERA_ASSIGN_OR_RETURN(double tflops, ReadDouble(value, field));
      if (tflops <= 0) return InvalidArgument("must be positive", field);
      spec.tflops = tflops;
    } else {
      return InvalidArgument("unknown field (expected name, memory, relative_speed, tflops)",
                             field);
    }
  }
  if (!have_name) return InvalidArgument("is required", prefix + ".name");
  if (!have_memory) return InvalidArgument("is required", prefix + ".memory");
  return spec;
}

}  // namespace

std::optional<int64_t> ParseByteSize(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  size_t start = i;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    ++i;
  }
  if (i == start) return std::nullopt;
  double number = 0;
  try {
    size_t used = 0;
    number = std::stod(std::string(text.substr(start, i - start)), &used);
    if (used != i - start) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  std::string unit;
  for (; i < text.size(); ++i) {
    if (std::isspace(static_cast<unsigned char>(text[i]))) break;
    unit.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(text[i]))));
  }
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  if (i != text.size()) return std::nullopt;
  double scale = 1;
  if (unit.empty() || unit == "B") {
    scale = 1;
  } else {
    static constexpr std::string_view kPrefixes = "KMGT";
    auto pos = kPrefixes.find(unit[0]);
    if (pos == std::string_view::npos) return std::nullopt;
    std::string rest = unit.substr(1);
    double base = 0;
    if (rest.empty() || rest == "I" || rest == "IB") {
      base = 1024;
    } else if (rest == "B") {
      base = 1000;
    } else {
      return std::nullopt;
    }
    scale = std::pow(base, static_cast<double>(pos + 1));
  }
  double bytes = number * scale;
  if (bytes > static_cast<double>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  // Plain byte counts must be whole.
  if (unit.empty() && number != std::floor(number)) return std::nullopt;
  return static_cast<int64_t>(bytes);
}

Result<InventoryFile> ParseInventoryFile(std::string_view text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("not valid YAML/JSON: ") + e.what());
  }
  if (!root.IsMap()) return InvalidArgument("the inventory file must be a mapping with 'devices'");
  InventoryFile file;
  bool have_devices = false;
  try {
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      const YAML::Node& value = kv.second;
      if (key == "combine") {
        if (!value.IsScalar()) return InvalidArgument("must be true or false", "combine");
        try {
          file.combine = value.as<bool>();
        } catch (const YAML::Exception&) {
          return InvalidArgument("must be true or false, got '" + value.Scalar() + "'", "combine");
        }
      } else if (key == "devices") {
        if (!value.IsSequence()) return InvalidArgument("must be a list", "devices");
        if (value.size() == 0) return InvalidArgument("must list at least one device", "devices");
        for (size_t i = 0; i < value.size(); ++i) {
          TESSERA_ASSIGN_OR_RETURN(auto spec,
                                   ReadDevice(value[i], "devices[" + std::to_string(i) + "]"));
          file.devices.push_back(std::move(spec));
        }
        have_devices = true;
      } else {
        return InvalidArgument("unknown field (expected devices, combine)", key);
      }
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("unreadable inventory: ") + e.what());
  }
  if (!have_devices) return InvalidArgument("is required", "devices");
  return file;
}

Result<InventoryFile> LoadInventoryFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("cannot read inventory file " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  auto parsed = ParseInventoryFile(text.str());
  if (!parsed.ok()) return parsed.status().WithPrefix("inventory file " + path.string());
  return parsed;
}

}  // namespace tessera::agent
