#include "api/job_spec_validation.h"

#include <fnmatch.h>

#include <array>
#include <cctype>
#include <string>

#include "api/entrypoint_kind.h"

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

// The torchrun contract and Tessera's own variables (daemon/controller/attempt_launch.h).
constexpr std::array<std::string_view, 6> kReservedEnvKeys = {
    "RANK", "WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "NODE_RANK", "CUDA_VISIBLE_DEVICES"};
constexpr std::array<std::string_view, 5> kReservedEnvPrefixes = {"MASTER_", "LOCAL_", "ROLE_",
                                                                  "TORCHELASTIC_", "TESSERA_"};

// Keys no job may set (IsDeniedEnvKey): exact names, then prefixes.
constexpr std::string_view kDeniedEnvKeys[] = {
    // The shell and the C library.
    "PATH", "ENV", "BASH_ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "IFS", "CDPATH",
    "GLOBIGNORE", "SHELL", "HOME", "TMPDIR", "GCONV_PATH", "GLIBC_TUNABLES", "NLSPATH", "LOCPATH",
    "HOSTALIASES", "RESOLV_HOST_CONF", "LOCALDOMAIN", "RES_OPTIONS", "TERMINFO", "TZDIR",
    // Other interpreters and runtimes a command may start.
    "PERL5LIB", "PERL5OPT", "PERLLIB", "RUBYLIB", "RUBYOPT", "NODE_OPTIONS", "NODE_PATH",
    "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS", "CLASSPATH", "LESSOPEN",
    "SSLKEYLOGFILE"};
constexpr std::string_view kDeniedEnvPrefixes[] = {
    "LD_",  "DYLD_", "PYTHON", "MALLOC_", "BASH_FUNC_",     "BASH_",     "OPENSSL_",
    "GIT_", "XDG_",  "LUA_",   "SSH_",    "CUDA_INJECTION", "LESSCLOSE", "KRB5"};

// NCCL loads plugins (net, tuner, profiler, ...) from the path these name.
bool IsNcclPluginKey(std::string_view key) {
  return key.starts_with("NCCL_") && key.find("PLUGIN") != std::string_view::npos;
}

// Where a documented builtin option ends: "--lr" in "--lr=0.1".
std::string_view OptionName(std::string_view arg) { return arg.substr(0, arg.find('=')); }

// The args of a model: entrypoint: a builtin job's options of its kind (and
// --loss to train), less --width (the width of a builtin model's layers,
// which an exported model carries itself). REQUIRES: ValidateBuiltinArgs
// passed.
Status CheckModelArgs(JobKind kind, const std::vector<std::string>& args) {
  const std::vector<BuiltinOption> options = BuiltinOptions(kind, /*exported=*/true);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view name = OptionName(args[i]);
    if (name == "--width") {
      return InvalidArgument(
          "--width belongs to builtin checkpoints: an exported model has its own width",
          "args[" + std::to_string(i) + "]");
    }
    for (const BuiltinOption& o : options) {
      if (o.name == name && o.takes_value && name.size() == args[i].size()) ++i;  // its value
    }
  }
  return Status::Ok();
}

bool Matches(const std::vector<std::string>& patterns, const std::string& text) {
  for (const std::string& p : patterns) {
    if (::fnmatch(p.c_str(), text.c_str(), 0) == 0) return true;
  }
  return false;
}

}  // namespace

bool IsDeniedEnvKey(std::string_view key) {
  for (std::string_view d : kDeniedEnvKeys) {
    if (key == d) return true;
  }
  for (std::string_view p : kDeniedEnvPrefixes) {
    if (key.starts_with(p)) return true;
  }
  return IsNcclPluginKey(key);
}

std::vector<BuiltinOption> BuiltinOptions(JobKind kind, bool exported) {
  // worker/runtime/main.cc documents each; Tessera itself passes --model,
  // --data, --steps, --checkpoint-every-s, --output and --checkpoint.
  if (kind == JobKind::kInfer) {
    return {{"--width", true},          {"--max-tile-px", true},   {"--threads", true},
            {"--max-chunks", true},     {"--batch", true},         {"--batch-pixels", true},
            {"--decode-threads", true}, {"--encode-threads", true}};
  }
  if (exported && kind == JobKind::kTrain) {
    // tessera-worker train --model-file: the builtin train options but --width,
    // and the loss.
    return {{"--lr", true},
            {"--seed", true},
            {"--image-size", true},
            {"--base-batch", true},
            {"--warmup-steps", true},
            {"--optimizer", true},
            {"--momentum", true},
            {"--weight-decay", true},
            {"--bucket-mb", true},
            {"--threads", true},
            {"--checkpoint-every-steps", true},
            {"--loss", true},
            {"--no-amp", false},
            {"--loss-scaling", false}};
  }
  return {{"--lr", true},        {"--seed", true},         {"--image-size", true},
          {"--width", true},     {"--base-batch", true},   {"--warmup-steps", true},
          {"--optimizer", true}, {"--momentum", true},     {"--weight-decay", true},
          {"--bucket-mb", true}, {"--threads", true},      {"--checkpoint-every-steps", true},
          {"--no-amp", false},   {"--loss-scaling", false}};
}

std::optional<std::string> BuiltinOptionValue(const std::vector<std::string>& args,
                                              std::string_view name) {
  std::optional<std::string> value;
  for (size_t i = 0; i < args.size(); ++i) {
    if (OptionName(args[i]) != name) continue;
    if (args[i].size() > name.size()) {
      value = args[i].substr(name.size() + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    }
  }
  return value;
}

Status ValidateBuiltinArgs(JobKind kind, const std::vector<std::string>& args, bool exported) {
  const std::vector<BuiltinOption> options = BuiltinOptions(kind, exported);
  const std::string_view kind_name = kind == JobKind::kInfer ? "infer" : "train";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string field = "args[" + std::to_string(i) + "]";
    const std::string_view arg = args[i];
    const std::string_view name = OptionName(arg);
    const BuiltinOption* found = nullptr;
    for (const BuiltinOption& o : options) {
      if (o.name == name) found = &o;
    }
    if (found == nullptr) {
      return InvalidArgument("is not an option a builtin " + std::string(kind_name) +
                                 " job may pass (see docs/rest-api.md for the documented options)",
                             field);
    }
    const bool inline_value = name.size() < arg.size();
    if (!found->takes_value) {
      if (inline_value) return InvalidArgument("is a flag and takes no value", field);
      continue;
    }
    if (inline_value) continue;
    if (i + 1 >= args.size()) return InvalidArgument("needs a value", field);
    ++i;  // the value: any text the worker's own checks accept
    if (args[i].starts_with("-") &&
        !(args[i].size() > 1 && std::isdigit(static_cast<unsigned char>(args[i][1])))) {
      return InvalidArgument("must be the value of " + std::string(name) + ", not an option",
                             "args[" + std::to_string(i) + "]");
    }
  }
  return Status::Ok();
}

Status CheckEntrypointPolicy(const JobSpec& spec, const EntrypointPolicy& policy) {
  for (const auto& [key, value] : spec.env) {
    if (!Matches(policy.env_allow, key)) {
      return InvalidArgument(
          "is not among the keys entrypoint " + spec.entrypoint + " lets jobs set (env_allow)",
          "env." + key);
    }
  }
  if (EntrypointKindOf(spec.entrypoint) == EntrypointKind::kCommand && !policy.free_args) {
    for (size_t i = 0; i < spec.args.size(); ++i) {
      if (!Matches(policy.args_allow, spec.args[i])) {
        return InvalidArgument(
            "is not an argument entrypoint " + spec.entrypoint + " accepts (args_allow)",
            "args[" + std::to_string(i) + "]");
      }
    }
  }
  return Status::Ok();
}

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
  if (EntrypointKindOf(name) == EntrypointKind::kUnknown) {
    return InvalidArgument("must look like \"builtin:<name>\", \"cmd:<name>\" or \"model:<name>\"",
                           std::string(field));
  }
  if (!IsValidName(EntrypointId(name))) {
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
  const EntrypointKind entrypoint = EntrypointKindOf(s.entrypoint);
  const bool builtin = entrypoint == EntrypointKind::kBuiltin;
  const bool model = entrypoint == EntrypointKind::kModel;

  TESSERA_RETURN_IF_ERROR(CheckRange(s.global_batch, 1, kMaxGlobalBatch, "global_batch"));
  // Tessera counts a builtin model's steps; a command's script counts its own.
  const bool steps_required = !infer && (builtin || model);
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
  // An exported model infers whole on every device; training cuts its
  // layers (tesserad profiles the file) like a builtin model's.
  if (model && infer && s.layout != "auto" && s.layout != "data") {
    return InvalidArgument("must be auto or data for a model: entrypoint's infer job", "layout");
  }
  // Training reads its pairs from the dataset.
  if (model && !infer && s.dataset.empty()) {
    return InvalidArgument("is required to train a model: entrypoint", "dataset");
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
  TESSERA_RETURN_IF_ERROR(CheckAbsolutePath(s.checkpoint, "checkpoint", infer && builtin,
                                            "is required for infer jobs of builtin models"));
  if (model && !s.checkpoint.empty()) {
    return InvalidArgument(
        "must be empty for a model: entrypoint (an exported model carries its weights)",
        "checkpoint");
  }
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
  if (builtin) TESSERA_RETURN_IF_ERROR(ValidateBuiltinArgs(s.kind, s.args));
  if (model) {
    TESSERA_RETURN_IF_ERROR(ValidateBuiltinArgs(s.kind, s.args, /*exported=*/true));
    TESSERA_RETURN_IF_ERROR(CheckModelArgs(s.kind, s.args));
  }

  if (!s.image.empty() && !model) {
    return InvalidArgument("is only valid for model: entrypoints (an exported model's images)",
                           "image");
  }
  TESSERA_RETURN_IF_ERROR(ValidateImageConvention(s.image, "image"));

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
    if (IsDeniedEnvKey(key)) {
      return InvalidArgument(
          "may not be set by a job: it can make the loader, a shell or an interpreter run "
          "code the job names",
          field);
    }
    TESSERA_RETURN_IF_ERROR(CheckString(value, field));
  }
  return Status::Ok();
}

}  // namespace tessera::api
