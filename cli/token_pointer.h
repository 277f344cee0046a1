// `tessera token ...`: a pointer, not a command. API tokens are
// administered on the controller's machine, against its store, by
// `tesserad token` (daemon/auth/token_admin.h); the CLI talks only to the REST
// API and links nothing of the daemon. Whatever follows `token`, the
// command prints where to go (kTokenPointer) on stderr and exits with
// kExitUsage.
//
// Thread safety: as RunCli.
#ifndef TESSERA_CLI_TOKEN_POINTER_H_
#define TESSERA_CLI_TOKEN_POINTER_H_

#include <string_view>

#include "cli/cli_app.h"

namespace tessera::cli {

inline constexpr std::string_view kTokenPointer =
    "token administration runs on the controller's machine, against its store:\n"
    "  tesserad token create USER [--admin] [--db <state_dir>/tessera.db]\n"
    "  tesserad token list [--db ...]\n"
    "  tesserad token revoke ID [--db ...]\n"
    "(--state-dir <state_dir> or TESSERA_DB instead of --db; see tesserad token --help)\n";

// Adds the `token` subcommand to `app`.
void AddTokenPointer(CLI::App& app, CliContext& ctx);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_TOKEN_POINTER_H_
