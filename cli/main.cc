// tessera: the command-line client of a Tessera cluster.
#include <iostream>
#include <string>
#include <vector>

#include "cli/cli_app.h"
#include "cli/token_commands.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  // `token` works on the controller's local store, not through the API.
  std::vector<tessera::cli::CommandRegistrar> local = {tessera::cli::RegisterTokenCommands};
  return tessera::cli::RunCli(args, std::cout, std::cerr, local);
}
