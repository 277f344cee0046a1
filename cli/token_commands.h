// `tessera token create|list|revoke`: API tokens, managed on the
// controller's local SQLite store (run on the controller's machine, as a
// user who may read the state folder). Tokens are stored only as salted
// hashes; `create` prints the plaintext once.
//
//   tessera token create USER [--admin] [--db PATH]
//   tessera token list [--db PATH]
//   tessera token revoke ID [--db PATH]
// The store defaults to $TESSERA_DB, else var/tesserad/tessera.db.
//
// Thread safety: as RunCli.
#ifndef TESSERA_CLI_TOKEN_COMMANDS_H_
#define TESSERA_CLI_TOKEN_COMMANDS_H_

#include "cli/cli_app.h"

namespace tessera::cli {

void RegisterTokenCommands(CLI::App& app, CliContext& ctx);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_TOKEN_COMMANDS_H_
