#include "agent/inventory_file.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>

#include "common/file_system.h"
#include "common/quantities.h"
#include "common/yaml_scalars.h"

namespace tessera::agent {
namespace {

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
      TESSERA_ASSIGN_OR_RETURN(double speed, YamlNumber(value, field));
      if (speed <= 0 || speed > 1000) return InvalidArgument("must be in (0, 1000]", field);
      spec.relative_speed = speed;
    } else if (key == "tflops") {
      TESSERA_ASSIGN_OR_RETURN(double tflops, YamlNumber(value, field));
      if (tflops <= 0) return InvalidArgument("must be positive", field);
      spec.tflops = tflops;
    } else if (key == "tflops_half") {
      TESSERA_ASSIGN_OR_RETURN(double tflops, YamlNumber(value, field));
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

// The quantity `parse` reads in the scalar `value` (a rate like 100Mbit, a
// duration like 2ms), at most `at_most`; else `expected` with what the file
// has quoted.
Result<double> ReadQuantity(const YAML::Node& value,
                            std::optional<double> (*parse)(std::string_view), double at_most,
                            const std::string& expected, const std::string& field) {
  std::optional<double> quantity = value.IsScalar() ? parse(value.Scalar()) : std::nullopt;
  if (!quantity || *quantity > at_most) {
    const std::string got = value.IsScalar() ? value.Scalar() : "a non-scalar";
    return InvalidArgument(expected + ", got '" + got + "'", field);
  }
  return *quantity;
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
      TESSERA_ASSIGN_OR_RETURN(
          spec.bandwidth_bytes_per_s,
          ReadQuantity(value, ParseBandwidth, std::numeric_limits<double>::infinity(),
                       "must be a positive rate like 100Mbit (bits/s) or 12.5MB (bytes/s)", field));
      have_bandwidth = true;
    } else if (key == "latency") {
      TESSERA_ASSIGN_OR_RETURN(
          spec.latency_s,
          ReadQuantity(value, ParseDuration, 10,
                       "must be a one-way latency like 2ms or 250us, at most 10s", field));
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

Result<InventoryFile> ParseInventoryFile(std::string_view text) {
  TESSERA_ASSIGN_OR_RETURN(YAML::Node root, YamlParse(text));
  if (!root.IsMap()) return InvalidArgument("the inventory file must be a mapping with 'devices'");
  InventoryFile file;
  bool have_devices = false;
  try {
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      const YAML::Node& value = kv.second;
      if (key == "combine") {
        TESSERA_ASSIGN_OR_RETURN(file.combine, YamlBool(value, "combine"));
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
