// `tessera plan FILE|flags`: a dry run. Sends the spec (cli/spec_flags.h)
// to POST /api/v1/plans and prints the plans the scheduler would pick, best
// first (layout, devices, micro-batches, predicted step time and samples/s,
// why), the hand-made baselines with the best plan's speedup over each, and
// why other layouts lost (scheduler/plan_json.h shapes). While tesserad
// measures the model's profile (202, "measuring_profile") it says so on
// stderr and asks again when told, for 15 minutes at most.
//
// Thread safety: as RunCli.
#ifndef TESSERA_CLI_PLAN_COMMAND_H_
#define TESSERA_CLI_PLAN_COMMAND_H_

#include "cli/cli_app.h"

namespace tessera::cli {

// Adds the `plan` subcommand to `app`.
void AddPlan(CLI::App& app, CliContext& ctx);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_PLAN_COMMAND_H_
