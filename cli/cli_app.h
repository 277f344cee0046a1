// The `tessera` command line: argument parsing and every command that talks
// to the REST API, as a library so tests (and the lead's local commands)
// can drive it without a process.
//
//   tessera [--server URL] [--token T] [--config FILE] [--json] [--timeout S] <command>
//   submit FILE | submit --name N --entrypoint E --global-batch B ...
//   jobs [--state S] [--owner U] [--limit N] [--after ID]
//   job ID | cancel ID | events ID [--after N] [--limit N]
//   job ID --watch (an infer job's progress; a training job's loss sparkline
//     and per-rank step time split and memory, cli/training_view.h)
//   logs ID [--rank R] [--tail N] | metrics ID [--rank N] [--csv]
//   nodes | plan FILE | entrypoints [list | add NAME [--command P] | rm NAME]
//   (plan waits while tesserad measures the model's profile)
//
// Output: human tables by default, the API's JSON with --json. An API error
// prints "error: <field>: <message>" on stderr.
// Exit codes: 0 ok, 1 the API answered an error, 2 usage or local
// validation error, 3 the server could not be reached.
//
//   token ...: only points to `tesserad token` on the controller's machine
//     (cli/token_pointer.h); exit code 2
//
// Extension point: more commands are added by passing CommandRegistrars
// to RunCli.
//
// Thread safety: RunCli is reentrant (no globals besides the environment).
#ifndef TESSERA_CLI_CLI_APP_H_
#define TESSERA_CLI_CLI_APP_H_

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/client_config.h"

namespace CLI {
class App;
}  // namespace CLI

namespace tessera::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitApiError = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnreachable = 3;

// Shared by every command of one run.
struct CliContext {
  std::ostream& out;
  std::ostream& err;
  ClientFlags flags;  // filled by the global options before a command runs
  bool json = false;
  bool terminal = false;  // out is a terminal: progress bars, live redraws
  EnvLookup env = ProcessEnv;
  int exit_code = kExitOk;  // a command's callback sets it
};

// Adds subcommands to `app`. A registrar's callbacks set ctx.exit_code.
using CommandRegistrar = std::function<void(CLI::App& app, CliContext& ctx)>;

// Parses argv and runs one command. argv[0] is the program name.
int RunCli(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err,
           const std::vector<CommandRegistrar>& extra_commands = {}, EnvLookup env = ProcessEnv);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_CLI_APP_H_
