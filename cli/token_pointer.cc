#include "cli/token_pointer.h"

#include <CLI/CLI.hpp>

namespace tessera::cli {

void AddTokenPointer(CLI::App& app, CliContext& ctx) {
  CLI::App* token =
      app.add_subcommand("token", "API tokens: `tesserad token` on the controller's machine");
  // Every word after `token` (`create bob`, `--db PATH`, `--help`) is left
  // unparsed: each gets the same pointer.
  token->prefix_command();
  token->set_help_flag();
  token->callback([&ctx] {
    ctx.err << kTokenPointer;
    ctx.exit_code = kExitUsage;
  });
}

}  // namespace tessera::cli
