#include "cli/cli_app.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/token_pointer.h"

namespace tessera::cli {

int RunCli(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err,
           const std::vector<CommandRegistrar>& extra_commands, EnvLookup env) {
  CliContext ctx{out, err};
  ctx.env = std::move(env);
  ctx.terminal = &out == &std::cout && ::isatty(STDOUT_FILENO) == 1;
  CLI::App app{"tessera: talk to a Tessera cluster (tesserad REST API)", "tessera"};
  app.require_subcommand(1);
  std::string server, token, config;
  double timeout_s = 0;
  auto* server_opt = app.add_option("--server", server, "http://host:port (env TESSERA_SERVER)");
  auto* token_opt = app.add_option("--token", token, "API token (env TESSERA_TOKEN)");
  auto* config_opt =
      app.add_option("--config", config, "config file (default ~/.config/tessera/cli.yaml)");
  auto* timeout_opt = app.add_option("--timeout", timeout_s, "seconds per request (default 10)");
  std::string ca_file, ca_sha256;
  auto* ca_file_opt = app.add_option("--ca-file", ca_file,
                                     "PEM CA file to verify an https server (env TESSERA_CA_FILE)");
  auto* ca_sha256_opt =
      app.add_option("--ca-sha256", ca_sha256,
                     "pinned SHA-256 fingerprint of the server's CA (env TESSERA_CA_SHA256)");
  app.add_flag("--json", ctx.json, "print the API's JSON instead of tables");
  // Global options are read before any command callback runs.
  app.parse_complete_callback([&] {
    if (server_opt->count()) ctx.flags.server = server;
    if (token_opt->count()) ctx.flags.token = token;
    if (config_opt->count()) ctx.flags.config_path = config;
    if (timeout_opt->count()) ctx.flags.timeout_s = timeout_s;
    if (ca_file_opt->count()) ctx.flags.ca_file = ca_file;
    if (ca_sha256_opt->count()) ctx.flags.ca_sha256 = ca_sha256;
  });

  AddJobCommands(app, ctx);
  AddNodes(app, ctx);
  AddPlan(app, ctx);
  AddQueue(app, ctx);
  AddTrace(app, ctx);
  AddEntrypoints(app, ctx);
  AddTokenPointer(app, ctx);
  // Commands a caller adds.
  for (const CommandRegistrar& registrar : extra_commands) registrar(app, ctx);

  std::vector<std::string> args(argv.begin() + (argv.empty() ? 0 : 1), argv.end());
  std::reverse(args.begin(), args.end());  // CLI11 parses a reversed vector
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e, out, err);
    return code == 0 ? kExitOk : kExitUsage;
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return kExitUsage;
  }
  return ctx.exit_code;
}

}  // namespace tessera::cli
