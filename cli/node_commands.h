// `tessera nodes`: every node with its devices (health, memory,
// utilization, measured fp32 and 16-bit speed, busy) and a note for each
// device the agent could not measure; and the admin subcommands
// `enrolments`, `revoke NAME`, `readmit NAME` and `join-bundle
// [--controller URL]` (a new node's controller URL, CA fingerprint and join
// token: a secret).
//
// Thread safety: as RunCli.
#ifndef TESSERA_CLI_NODE_COMMANDS_H_
#define TESSERA_CLI_NODE_COMMANDS_H_

#include "cli/cli_app.h"

namespace tessera::cli {

// Adds the `nodes` subcommand and its subcommands to `app`.
void AddNodes(CLI::App& app, CliContext& ctx);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_NODE_COMMANDS_H_
