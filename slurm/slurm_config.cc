#include "slurm/slurm_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <iterator>
#include <sstream>
#include <string_view>
#include <utility>

#include "common/quantities.h"
#include "common/yaml_scalars.h"
#include "slurm/slurm_rest_client.h"

namespace tessera::slurm {
namespace {

Result<GpuType> ReadGpuType(const YAML::Node& node, const std::string& prefix) {
  if (!node.IsMap()) return InvalidArgument("must be a mapping", prefix);
  GpuType t;
  bool have_memory = false;
  bool have_tflops = false;
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    const std::string field = prefix + "." + key;
    if (key == "memory") {
      auto bytes = kv.second.IsScalar() ? ParseByteSize(kv.second.Scalar()) : std::nullopt;
      if (!bytes || *bytes <= 0) return InvalidArgument("must be a byte size like 16GiB", field);
      t.memory_bytes = *bytes;
      have_memory = true;
    } else if (key == "tflops") {
      TESSERA_ASSIGN_OR_RETURN(t.tflops, YamlNumber(kv.second, field));
      if (t.tflops <= 0) return InvalidArgument("must be positive", field);
      have_tflops = true;
    } else if (key == "relative_speed") {
      TESSERA_ASSIGN_OR_RETURN(t.relative_speed, YamlNumber(kv.second, field));
      if (t.relative_speed <= 0 || t.relative_speed > 1000) {
        return InvalidArgument("must be in (0, 1000]", field);
      }
    } else if (key == "emulated") {
      TESSERA_ASSIGN_OR_RETURN(t.emulated, YamlBool(kv.second, field));
    } else {
      return InvalidArgument("unknown field (expected tflops, relative_speed, memory, emulated)",
                             field);
    }
  }
  if (!have_memory) return InvalidArgument("is required", prefix + ".memory");
  // The planner sizes each GPU's share by it (an agent measures it; Slurm
  // nodes have none, so the admin declares it).
  if (!have_tflops) return InvalidArgument("is required", prefix + ".tflops");
  return t;
}

// The block's plain string fields.
constexpr std::pair<std::string_view, std::string SlurmConfig::*> kStringFields[] = {
    {"url", &SlurmConfig::url},
    {"user", &SlurmConfig::user},
    {"token_file", &SlurmConfig::token_file},
    {"partition", &SlurmConfig::partition},
    {"launcher", &SlurmConfig::launcher},
    {"rank_root", &SlurmConfig::rank_root},
};

Result<std::optional<SlurmConfig>> FromRoot(const YAML::Node& root) {
  if (!root.IsMap() || !root["slurm"]) return std::optional<SlurmConfig>();
  const YAML::Node block = root["slurm"];
  if (!block.IsMap()) return InvalidArgument("must be a mapping", "slurm");
  SlurmConfig c;
  for (const auto& kv : block) {
    const std::string key = kv.first.as<std::string>();
    const std::string field = "slurm." + key;
    const YAML::Node& v = kv.second;
    const auto string_field = std::find_if(std::begin(kStringFields), std::end(kStringFields),
                                           [&](const auto& f) { return f.first == key; });
    if (string_field != std::end(kStringFields)) {
      TESSERA_ASSIGN_OR_RETURN((c.*string_field->second), YamlString(v, field));
    } else if (key == "poll_interval_ms") {
      TESSERA_ASSIGN_OR_RETURN(double ms, YamlNumber(v, field));
      if (ms < 50 || ms > 60'000) return InvalidArgument("must be in 50..60000", field);
      c.poll_interval_ms = static_cast<int64_t>(ms);
    } else if (key == "gpu_types") {
      if (!v.IsMap()) return InvalidArgument("must be a mapping of GRES type to GPU", field);
      for (const auto& t : v) {
        const std::string type = t.first.as<std::string>();
        TESSERA_ASSIGN_OR_RETURN(c.gpu_types[type], ReadGpuType(t.second, field + "." + type));
      }
    } else {
      return InvalidArgument(
          "unknown field (expected url, user, token_file, partition, launcher, rank_root, "
          "poll_interval_ms, gpu_types)",
          field);
    }
  }
  TESSERA_RETURN_IF_ERROR(ParseRestUrl(c.url).status());
  if (c.user.empty()) return InvalidArgument("is required", "slurm.user");
  if (c.token_file.empty()) return InvalidArgument("is required", "slurm.token_file");
  if (c.gpu_types.empty()) return InvalidArgument("name at least one GPU type", "slurm.gpu_types");
  return std::optional<SlurmConfig>(std::move(c));
}

}  // namespace

Result<std::optional<SlurmConfig>> ParseSlurmConfig(const std::string& yaml) {
  try {
    return FromRoot(YAML::Load(yaml));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("not valid YAML: ") + e.what(), "slurm");
  }
}

Result<std::optional<SlurmConfig>> LoadSlurmConfig(const std::string& path) {
  try {
    return FromRoot(YAML::LoadFile(path));
  } catch (const YAML::BadFile&) {
    return InvalidArgument("cannot read config file " + path, "config");
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("not valid YAML: ") + e.what(), "slurm");
  }
}

}  // namespace tessera::slurm
