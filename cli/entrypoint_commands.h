// `tessera entrypoints [list | add NAME [--command P] [--description D] |
// rm NAME]`: the entrypoint allow-list (add and rm are for admins);
// `entrypoints` alone lists.
//
// Thread safety: as RunCli.
#ifndef TESSERA_CLI_ENTRYPOINT_COMMANDS_H_
#define TESSERA_CLI_ENTRYPOINT_COMMANDS_H_

#include "cli/cli_app.h"

namespace tessera::cli {

// Adds the `entrypoints` subcommand and its subcommands to `app`.
void AddEntrypoints(CLI::App& app, CliContext& ctx);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_ENTRYPOINT_COMMANDS_H_
