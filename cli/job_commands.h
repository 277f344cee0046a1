// The commands about jobs: `submit FILE|flags`, `jobs [--state --owner
// --limit --after]`, `job ID [--watch]`, `cancel ID`, `events ID [--after
// --limit]`, `logs ID [--rank --tail]` and `metrics ID [--rank N] [--csv]`.
// A job id must be a positive integer (kExitUsage naming "id").
//
// Thread safety: as RunCli.
#ifndef TESSERA_CLI_JOB_COMMANDS_H_
#define TESSERA_CLI_JOB_COMMANDS_H_

#include "cli/cli_app.h"

namespace tessera::cli {

// Adds every job subcommand to `app`, in the order `tessera --help` lists them.
void AddJobCommands(CLI::App& app, CliContext& ctx);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_JOB_COMMANDS_H_
