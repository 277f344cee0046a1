// The job spec flags `submit` and `plan` share: a spec FILE (JSON or YAML,
// cli/job_spec_file.h) and flags for each field, which override the file's;
// AddSpecCommand, a subcommand that takes them.
//
// Thread safety: as RunCli.
#ifndef TESSERA_CLI_SPEC_FLAGS_H_
#define TESSERA_CLI_SPEC_FLAGS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "api/types.h"
#include "cli/cli_app.h"
#include "common/status.h"

namespace tessera::cli {

struct SubmitFlags {
  std::string file;
  std::string name, kind, entrypoint, dataset, output, checkpoint, layout;
  int64_t global_batch = 0, steps = 0, checkpoint_every_s = 0, priority = 0, max_attempts = 0,
          min_devices = 0, max_devices = 0, image_width = 0, image_height = 0;
  std::vector<std::string> args;
  std::vector<std::string> env;
  // spec.image (model: entrypoints, api/image_convention.h).
  std::string image_input, image_output, value_range;  // value_range: "lo,hi"
  int64_t align_px = 0, halo_px = -1;
  bool elastic = true;  // --elastic / --no-elastic
  bool dry_run = false;
};

// Adds the spec flags to `cmd`, bound to `*f`. REQUIRES: *f outlives `cmd`'s
// parse.
void AddSpecFlags(CLI::App* cmd, SubmitFlags* f);

// Builds the spec from FILE (if any) and the flags given on `cmd` (flags win,
// each image flag over its own member of the file's `image`), validated
// (api::ValidateJobSpec); kInvalidArgument naming the field, or the flag
// (`--value-range`, `--image-input`, ...) for a bad image flag.
Result<api::JobSpec> BuildSpec(CLI::App& cmd, const SubmitFlags& f);

// Adds `name FILE|flags` to `app` with the spec flags. When it runs, `run`
// gets the built spec (BuildSpec); a bad one ends the command with its error
// (PrintError) and kExitUsage.
void AddSpecCommand(CLI::App& app, CliContext& ctx, const char* name, const char* help,
                    std::function<void(const api::JobSpec& spec)> run);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_SPEC_FLAGS_H_
