// tessera: the command-line client of a Tessera cluster.
#include <iostream>
#include <string>
#include <vector>

#include "cli/cli_app.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  // Local commands that do not talk to the API (e.g. `token create|list|revoke`
  // on the controller's SQLite store) are registered here:
  //   std::vector<tessera::cli::CommandRegistrar> local = {tessera::daemon::RegisterTokenCommands};
  std::vector<tessera::cli::CommandRegistrar> local;
  return tessera::cli::RunCli(args, std::cout, std::cerr, local);
}
