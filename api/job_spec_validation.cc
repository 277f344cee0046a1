#include "api/job_spec_validation.h"

#include <array>
#include <string>

namespace tessera::api {
namespace {

bool HasNul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

Status CheckString(std::string_view value, std::string_view field) {
  if (HasNul(value)) return InvalidArgument("must not contain NUL bytes", std::string(field));
  if (value.size() > kMaxStringLength) {
    return InvalidArgument("is longer than " + std::to_string(kMaxStringLength) + " bytes",
                           std::string(field));
  }
  return Status::Ok();
}

Status CheckRange(int64_t value, int64_t lo, int64_t hi, std::string_view field) {
  if (value < lo || value > hi) {
    return InvalidArgument("must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                               " (got " + std::to_string(value) + ")",
                           std::string(field));
  }
  return Status::Ok();
}

Status CheckAbsolutePath(std::string_view path, std::string_view field, bool required,
                         std::string_view why_required) {
  TESSERA_RETURN_IF_ERROR(CheckString(path, field));
  if (path.empty()) {
    if (required) return InvalidArgument(std::string(why_required), std::string(field));
    return Status::Ok();
  }
  if (path.front() != '/') return InvalidArgument("must be an absolute path", std::string(field));
  return Status::Ok();
}

bool IsEnvKey(std::string_view key) {
  if (key.empty()) return false;
  auto upper_or_underscore = [](char c) { return (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!upper_or_underscore(key.front())) return false;
  for (char c : key) {
    if (!upper_or_underscore(c) && !(c >= '0' && c <= '9')) return false;
  }
  return true;
}

// The torchrun contract and Tessera's own variables (daemon/attempt_launch.h).
constexpr std::array<std::string_view, 6> kReservedEnvKeys = {
    "RANK", "WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "NODE_RANK", "CUDA_VISIBLE_DEVICES"};
constexpr std::array<std::string_view, 5> kReservedEnvPrefixes = {"MASTER_", "LOCAL_", "ROLE_",
                                                                  "TORCHELASTIC_", "TESSERA_"};

}  // namespace

bool IsValidName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool IsReservedEnvKey(std::string_view key) {
  for (std::string_view r : kReservedEnvKeys) {
    if (key == r) return true;
  }
  for (std::string_view p : kReservedEnvPrefixes) {
    if (key.starts_with(p)) return true;
  }
  return false;
}

Status ValidateEntrypointName(std::string_view name, std::string_view field) {
  if (HasNul(name)) return InvalidArgument("must not contain NUL bytes", std::string(field));
  std::string_view id;
  if (name.starts_with("builtin:")) {
    id = name.substr(8);
  } else if (name.starts_with("cmd:")) {
    id = name.substr(4);
  } else {
    return InvalidArgument("must look like \"builtin:<name>\" or \"cmd:<name>\"",
                           std::string(field));
  }
  if (!IsValidName(id)) {
    return InvalidArgument("name after the prefix must be 1..128 characters of [A-Za-z0-9._-]",
                           std::string(field));
  }
  return Status::Ok();
}

Status ValidateJobSpec(const JobSpec& s) {
  const bool infer = s.kind == JobKind::kInfer;

  if (HasNul(s.name)) return InvalidArgument("must not contain NUL bytes", "name");
  if (!IsValidName(s.name)) {
    return InvalidArgument("must be 1..128 characters of [A-Za-z0-9._-]", "name");
  }
  TESSERA_RETURN_IF_ERROR(ValidateEntrypointName(s.entrypoint, "entrypoint"));

  TESSERA_RETURN_IF_ERROR(CheckRange(s.global_batch, 1, kMaxGlobalBatch, "global_batch"));
  // Tessera counts a builtin model's steps; a command's script counts its own.
  const bool steps_required = !infer && s.entrypoint.starts_with("builtin:");
  TESSERA_RETURN_IF_ERROR(CheckRange(s.steps, steps_required ? 1 : 0, kMaxSteps, "steps"));
  TESSERA_RETURN_IF_ERROR(
      CheckRange(s.checkpoint_every_s, 1, kMaxCheckpointEverySeconds, "checkpoint_every_s"));

  if (HasNul(s.layout)) return InvalidArgument("must not contain NUL bytes", "layout");
  if (s.layout != "auto" && s.layout != "data" && s.layout != "pipeline" && s.layout != "hybrid" &&
      s.layout != "tiled") {
    return InvalidArgument("must be one of auto, data, pipeline, hybrid, tiled", "layout");
  }
  if (s.layout == "tiled" && !infer) {
    return InvalidArgument("\"tiled\" is only valid for infer jobs", "layout");
  }

  TESSERA_RETURN_IF_ERROR(CheckRange(s.priority, -kMaxPriority, kMaxPriority, "priority"));
  TESSERA_RETURN_IF_ERROR(CheckRange(s.max_attempts, 1, kMaxAttempts, "max_attempts"));
  TESSERA_RETURN_IF_ERROR(CheckRange(s.min_devices, 1, kMaxDevices, "min_devices"));
  if (s.max_devices != 0) {
    if (s.max_devices < s.min_devices) {
      return InvalidArgument("must be 0 (no limit) or at least min_devices", "max_devices");
    }
    TESSERA_RETURN_IF_ERROR(CheckRange(s.max_devices, 0, kMaxDevices, "max_devices"));
  }

  TESSERA_RETURN_IF_ERROR(
      CheckAbsolutePath(s.dataset, "dataset", infer, "is required for infer jobs"));
  TESSERA_RETURN_IF_ERROR(
      CheckAbsolutePath(s.output, "output", infer, "is required for infer jobs"));
  TESSERA_RETURN_IF_ERROR(CheckAbsolutePath(s.checkpoint, "checkpoint",
                                            infer && s.entrypoint.starts_with("builtin:"),
                                            "is required for infer jobs of builtin models"));
  TESSERA_RETURN_IF_ERROR(CheckRange(s.image_width, 0, kMaxImageSide, "image_width"));
  TESSERA_RETURN_IF_ERROR(CheckRange(s.image_height, 0, kMaxImageSide, "image_height"));
  if ((s.image_width == 0) != (s.image_height == 0)) {
    return InvalidArgument("set both image_width and image_height, or neither",
                           s.image_width == 0 ? "image_width" : "image_height");
  }
  if (s.image_width != 0 && !infer) {
    return InvalidArgument("is only valid for infer jobs", "image_width");
  }

  if (s.args.size() > kMaxArgs) {
    return InvalidArgument("must have at most " + std::to_string(kMaxArgs) + " entries", "args");
  }
  for (size_t i = 0; i < s.args.size(); ++i) {
    TESSERA_RETURN_IF_ERROR(CheckString(s.args[i], "args[" + std::to_string(i) + "]"));
  }

  if (s.env.size() > kMaxEnv) {
    return InvalidArgument("must have at most " + std::to_string(kMaxEnv) + " entries", "env");
  }
  for (const auto& [key, value] : s.env) {
    // The key is user input: never echo a NUL into a field name.
    if (HasNul(key)) return InvalidArgument("keys must not contain NUL bytes", "env");
    if (key.size() > kMaxNameLength) return InvalidArgument("key is too long", "env");
    std::string field = "env." + key;
    if (!IsEnvKey(key)) return InvalidArgument("key must match [A-Z_][A-Z0-9_]*", field);
    if (IsReservedEnvKey(key)) {
      return InvalidArgument("is reserved: Tessera sets it for every rank", field);
    }
    TESSERA_RETURN_IF_ERROR(CheckString(value, field));
  }
  return Status::Ok();
}

}  // namespace tessera::api
