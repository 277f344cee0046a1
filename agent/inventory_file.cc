#include "agent/inventory_file.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "common/file_system.h"

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
    } else if (key == "tflops_half") {
      TESSERA_ASSIGN_OR_RETURN(double tflops, ReadDouble(value, field));
      if (tflops <= 0) return InvalidArgument("must be positive", field);
      spec.tflops_half = tflops;
    } else {
      return InvalidArgument(
          "unknown field (expected name, memory, relative_speed, tflops, tflops_half)", field);
    }
  }
  if (!have_name) return InvalidArgument("is required", prefix + ".name");
  if (!have_memory) return InvalidArgument("is required", prefix + ".memory");
  return spec;
}

// A number (decimal, optionally with an exponent) and the unit after it,
// lower-cased, without spaces around either; nullopt for anything else.
struct NumberWithUnit {
  double number = 0;
  std::string unit;
};
std::optional<NumberWithUnit> SplitNumber(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  size_t end = 0;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) ||
                               text[end] == '.' || text[end] == 'e' || text[end] == 'E' ||
                               ((text[end] == '+' || text[end] == '-') && end > 0 &&
                                (text[end - 1] == 'e' || text[end - 1] == 'E')))) {
    ++end;
  }
  // "1e" would read "1" and leave "e": back off an exponent with no digits.
  while (end > 0 && !std::isdigit(static_cast<unsigned char>(text[end - 1])) &&
         text[end - 1] != '.') {
    --end;
  }
  if (end == 0 || (!std::isdigit(static_cast<unsigned char>(text[0])) && text[0] != '.')) {
    return std::nullopt;
  }
  NumberWithUnit out;
  try {
    size_t used = 0;
    out.number = std::stod(std::string(text.substr(0, end)), &used);
    if (used != end) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (!std::isfinite(out.number)) return std::nullopt;
  std::string_view rest = text.substr(end);
  while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.front()))) {
    rest.remove_prefix(1);
  }
  for (char c : rest) {
    if (std::isspace(static_cast<unsigned char>(c))) return std::nullopt;
    out.unit.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

// The factor of a unit prefix: "" 1, k/m/g/t decimal (1000^n) or, where
// `bare_is_binary`, binary; "ki"/"mi"/.. always binary (1024^n). nullopt for
// anything else.
std::optional<double> PrefixFactor(std::string_view prefix, bool bare_is_binary) {
  if (prefix.empty()) return 1.0;
  static constexpr std::string_view kPrefixes = "kmgt";
  const auto pos = kPrefixes.find(prefix[0]);
  if (pos == std::string_view::npos) return std::nullopt;
  const std::string_view rest = prefix.substr(1);
  if (!rest.empty() && rest != "i") return std::nullopt;
  const double base = rest == "i" || bare_is_binary ? 1024 : 1000;
  return std::pow(base, static_cast<double>(pos + 1));
}

Result<NetworkSpec> ReadNetwork(const YAML::Node& node) {
  if (!node.IsMap()) {
    return InvalidArgument("must be a mapping with bandwidth and latency", "network");
  }
  NetworkSpec spec;
  bool have_bandwidth = false;
  bool have_latency = false;
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    const std::string field = "network." + key;
    const YAML::Node& value = kv.second;
    if (key == "bandwidth") {
      auto bandwidth = value.IsScalar() ? ParseBandwidth(value.Scalar()) : std::nullopt;
      if (!bandwidth) {
        return InvalidArgument(
            "must be a positive rate like 100Mbit (bits/s) or 12.5MB (bytes/s), got '" +
                (value.IsScalar() ? value.Scalar() : std::string("a non-scalar")) + "'",
            field);
      }
      spec.bandwidth_bytes_per_s = *bandwidth;
      have_bandwidth = true;
    } else if (key == "latency") {
      auto latency = value.IsScalar() ? ParseDuration(value.Scalar()) : std::nullopt;
      if (!latency || *latency > 10) {
        return InvalidArgument(
            "must be a one-way latency like 2ms or 250us, at most 10s, got '" +
                (value.IsScalar() ? value.Scalar() : std::string("a non-scalar")) + "'",
            field);
      }
      spec.latency_s = *latency;
      have_latency = true;
    } else {
      return InvalidArgument("unknown field (expected bandwidth, latency)", field);
    }
  }
  if (!have_bandwidth) return InvalidArgument("is required", "network.bandwidth");
  if (!have_latency) return InvalidArgument("is required", "network.latency");
  return spec;
}

}  // namespace

std::optional<double> ParseBandwidth(std::string_view text) {
  auto n = SplitNumber(text);
  if (!n) return std::nullopt;
  std::string_view unit = n->unit;
  if (unit.ends_with("/s")) unit.remove_suffix(2);
  std::optional<double> factor;
  if (unit.ends_with("bit")) {
    // Bit units: Kbit, Mbit, .. decimal; Kibit, Mibit, .. binary.
    factor = PrefixFactor(unit.substr(0, unit.size() - 3), /*bare_is_binary=*/false);
    if (factor) *factor /= 8;
  } else if (unit.empty() || unit == "b") {
    factor = 1.0;
  } else if (unit.size() == 2 && unit[1] == 'b') {
    factor = PrefixFactor(unit.substr(0, 1), /*bare_is_binary=*/false);  // KB, MB: decimal
  } else {
    if (unit.ends_with("ib")) unit.remove_suffix(1);       // KiB -> Ki
    factor = PrefixFactor(unit, /*bare_is_binary=*/true);  // K, Ki: binary
  }
  if (!factor) return std::nullopt;
  const double bytes_per_s = n->number * *factor;
  if (!(bytes_per_s > 0) || !std::isfinite(bytes_per_s)) return std::nullopt;
  return bytes_per_s;
}

std::optional<double> ParseDuration(std::string_view text) {
  auto n = SplitNumber(text);
  if (!n) return std::nullopt;
  double scale = 0;
  if (n->unit.empty() || n->unit == "s") {
    scale = 1;
  } else if (n->unit == "ms") {
    scale = 1e-3;
  } else if (n->unit == "us") {
    scale = 1e-6;
  } else if (n->unit == "ns") {
    scale = 1e-9;
  } else {
    return std::nullopt;
  }
  const double seconds = n->number * scale;
  if (!(seconds >= 0) || !std::isfinite(seconds)) return std::nullopt;
  return seconds;
}

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
      } else if (key == "network") {
        TESSERA_ASSIGN_OR_RETURN(file.network, ReadNetwork(value));
      } else {
        return InvalidArgument("unknown field (expected devices, combine, network)", key);
      }
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("unreadable inventory: ") + e.what());
  }
  if (!have_devices) return InvalidArgument("is required", "devices");
  return file;
}

Status CheckEmulationCapacity(const InventoryFile& file, double host_cores) {
  if (host_cores <= 0) return Status::Ok();
  double sum = 0;
  for (const auto& d : file.devices) sum += d.relative_speed;
  if (sum <= host_cores + 1e-9) return Status::Ok();
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "the emulated devices' relative speeds add up to %.3g but this host has %.3g "
                "cores: each emulated device needs its speed's share of one core while it "
                "computes; lower the speeds (keeping their ratios) so they add up to at most %.3g",
                sum, host_cores, host_cores);
  return Status(StatusCode::kFailedPrecondition, buf, "devices");
}

Result<InventoryFile> LoadInventoryFile(const std::filesystem::path& path) {
  Result<std::string> text = FileSystem::Default()->ReadFile(path);
  if (!text.ok()) return InvalidArgument("cannot read inventory file " + path.string());
  auto parsed = ParseInventoryFile(*text);
  if (!parsed.ok()) return parsed.status().WithPrefix("inventory file " + path.string());
  return parsed;
}

}  // namespace tessera::agent
