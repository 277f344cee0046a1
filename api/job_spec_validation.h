// ValidateJobSpec: range and allow-list checks on a submitted JobSpec.
//
// JobSpecFromJson (api/types.h) checks only the JSON shape; this function
// checks every value. The first violated rule is returned as
// kInvalidArgument whose field() names the offending field ("name",
// "args[3]", "env.RANK", ...). Rules (see docs/rest-api.md):
//   name           1..128 chars of [A-Za-z0-9._-]
//   entrypoint     "builtin:<id>", "cmd:<id>" or "model:<id>", id as for name
//                  (api/entrypoint_kind.h)
//   global_batch   1..1,048,576
//   steps          train of a builtin: or model: entrypoint: 1..1e9; otherwise 0..1e9 (a
//                  command's script knows its own steps; 0: not told)
//   checkpoint_every_s 1..86,400
//   layout         auto | data | pipeline | hybrid | tiled (tiled: infer only);
//                  auto or data for a model: entrypoint
//   priority       -1000..1000
//   max_attempts   1..100
//   min_devices    1..4096
//   max_devices    0 (no limit) or min_devices..4096
//   dataset        absolute path when set; required for infer and to train a
//                  model: entrypoint
//   output         absolute path when set; required for infer
//   checkpoint     absolute path when set; required for infer of builtin models;
//                  empty for a model: entrypoint (an exported model carries its
//                  weights)
//   image_width, image_height  infer only: 0 (nominal) or 1..100,000, both or neither
//   args           at most 64 entries of at most 4096 bytes; for a builtin:
//                  entrypoint only the worker's documented options of the
//                  job's kind (BuiltinOptions), as "--opt value" or
//                  "--opt=value" ("args[i]" names the first bad one); for a
//                  model: entrypoint the options of its kind less --width
//                  (BuiltinOptions(kind, exported); training adds --loss)
//   image          model: entrypoints only ("image"); ValidateImageConvention
//                  (api/image_convention.h), errors naming "image.<member>"
//   env            at most 64 entries; keys [A-Z_][A-Z0-9_]*, not reserved
//                  (RANK, WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, NODE_RANK,
//                  CUDA_VISIBLE_DEVICES, MASTER_*, LOCAL_*, ROLE_*,
//                  TORCHELASTIC_*, TESSERA_*) and not denied (IsDeniedEnvKey);
//                  values at most 4096 bytes
//   every string   no NUL bytes
//
// Thread safety: pure function.
#ifndef TESSERA_API_JOB_SPEC_VALIDATION_H_
#define TESSERA_API_JOB_SPEC_VALIDATION_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/types.h"
#include "common/status.h"

namespace tessera::api {

inline constexpr int64_t kMaxGlobalBatch = 1'048'576;
inline constexpr int64_t kMaxSteps = 1'000'000'000;
inline constexpr int64_t kMaxCheckpointEverySeconds = 86'400;
inline constexpr int64_t kMaxPriority = 1000;
inline constexpr int64_t kMaxAttempts = 100;
inline constexpr int64_t kMaxDevices = 4096;
inline constexpr int64_t kMaxImageSide = 100'000;
inline constexpr size_t kMaxNameLength = 128;
inline constexpr size_t kMaxArgs = 64;
inline constexpr size_t kMaxEnv = 64;
inline constexpr size_t kMaxStringLength = 4096;

Status ValidateJobSpec(const JobSpec& spec);

// True for 1..128 characters of [A-Za-z0-9._-] (job and entrypoint ids).
bool IsValidName(std::string_view name);

// Checks an entrypoint reference ("builtin:<id>", "cmd:<id>" or
// "model:<id>"); errors name `field`.
Status ValidateEntrypointName(std::string_view name, std::string_view field);

// True when `key` may be set in a job's env: [A-Z_][A-Z0-9_]* and not
// reserved for the launcher (RANK, WORLD_SIZE, MASTER_*, LOCAL_*, ...).
bool IsReservedEnvKey(std::string_view key);

// True when no job may set `key` whatever its entrypoint allows: variables
// that make a dynamic loader, libc, a shell or an interpreter load or run
// code or files the job names (LD_*, PATH, PYTHON*, BASH_ENV, ENV,
// GCONV_PATH, MALLOC_*, NCCL_NET_PLUGIN, HOME, ...). The list is a backstop
// behind the per-entrypoint env_allow patterns, not a complete catalogue.
bool IsDeniedEnvKey(std::string_view key);

// One documented command-line option of the builtin worker that a job may
// pass in `args`.
struct BuiltinOption {
  std::string_view name;  // "--lr"
  bool takes_value;       // "--lr 0.01" / "--lr=0.01"; false: a flag
};
// The options a job of `kind` may pass to a builtin: entrypoint, or with
// `exported` to a model: entrypoint (train: less --width, plus --loss; infer:
// the same list, --width refused by ValidateJobSpec). Options
// Tessera sets from the spec or the plan (--model, --data, --steps,
// --output, ...) and test hooks (--dump-params, --local) are not among them.
std::vector<BuiltinOption> BuiltinOptions(JobKind kind, bool exported = false);

// The value `args` give the option `name` ("--loss" in "--loss l1" or
// "--loss=l1"; the last one wins), or nullopt. REQUIRES: ValidateBuiltinArgs
// passed (a value follows every option that takes one).
std::optional<std::string> BuiltinOptionValue(const std::vector<std::string>& args,
                                              std::string_view name);

// Checks `args` of a builtin: entrypoint against BuiltinOptions(kind);
// errors name "args[i]".
Status ValidateBuiltinArgs(JobKind kind, const std::vector<std::string>& args,
                           bool exported = false);

// What a deployment lets the jobs of one entrypoint set (tesserad's config,
// daemon/daemon_config.h). Patterns are fnmatch(3) globs.
struct EntrypointPolicy {
  std::vector<std::string> env_allow;   // env keys a job may set ("WANDB_*")
  std::vector<std::string> args_allow;  // cmd: only: patterns every arg must match
  bool free_args = false;               // cmd: only: any args
};

// Checks a spec's env and args against its entrypoint's policy: every env
// key must match an env_allow pattern ("env.KEY"); for cmd: entrypoints
// without free_args every arg must match an args_allow pattern ("args[i]").
// Builtin and model: args are checked by ValidateJobSpec, not here.
// REQUIRES: spec passed ValidateJobSpec.
Status CheckEntrypointPolicy(const JobSpec& spec, const EntrypointPolicy& policy);

}  // namespace tessera::api

#endif  // TESSERA_API_JOB_SPEC_VALIDATION_H_
