// `tessera queue`: the waiting jobs in the order tesserad offers them
// devices (priority, then each user's weighted device share, then
// submission): position, job, user, priority, the user's share, and why the
// job still waits. Other users' jobs show their place and user only.
//
// Thread safety: as RunCli.
#ifndef TESSERA_CLI_QUEUE_COMMAND_H_
#define TESSERA_CLI_QUEUE_COMMAND_H_

#include "cli/cli_app.h"

namespace tessera::cli {

// Adds the `queue` subcommand to `app`.
void AddQueue(CLI::App& app, CliContext& ctx);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_QUEUE_COMMAND_H_
