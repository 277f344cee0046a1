// The subcommands of `tessera` that talk to the REST API. Each AddX adds its
// subcommand (and those under it) to `app`; their callbacks read the run's
// settings from `ctx` and set ctx.exit_code. RunCli adds them in the order
// `tessera --help` lists them. Each is implemented in the .cc file named in its
// comment. (`token`, which only points elsewhere, is cli/token_pointer.h.)
//
// Thread safety: as RunCli.
#ifndef TESSERA_CLI_COMMANDS_H_
#define TESSERA_CLI_COMMANDS_H_

#include "cli/cli_app.h"

namespace tessera::cli {

// job_commands.cc: the commands about jobs: `submit FILE|flags`, `jobs
// [--state --owner --limit --after]`, `job ID [--watch]`, `cancel ID`, `events
// ID [--after --limit]`, `logs ID [--rank --tail]` and `metrics ID [--rank N]
// [--csv]`. A job id must be a positive integer (kExitUsage naming "id").
//
// Adds every job subcommand to `app`, in the order `tessera --help` lists them.
void AddJobCommands(CLI::App& app, CliContext& ctx);

// node_commands.cc: `tessera nodes`: every node with its devices (health,
// memory, utilization, measured fp32 and 16-bit speed, busy) and a note for
// each device the agent could not measure; and the admin subcommands
// `enrolments`, `revoke NAME`, `readmit NAME` and `join-bundle [--controller
// URL]` (a new node's controller URL, CA fingerprint and join token: a secret).
//
// Adds the `nodes` subcommand and its subcommands to `app`.
void AddNodes(CLI::App& app, CliContext& ctx);

// plan_command.cc: `tessera plan FILE|flags`: a dry run. Sends the spec
// (cli/spec_flags.h) to POST /api/v1/plans and prints the plans the scheduler
// would pick, best first (layout, devices, micro-batches, predicted step time
// and samples/s, why), the hand-made baselines with the best plan's speedup
// over each, and why other layouts lost (scheduler/plan_json.h shapes). While
// tesserad measures the model's profile (202, "measuring_profile") it says so
// on stderr and asks again when told, for 15 minutes at most.
//
// Adds the `plan` subcommand to `app`.
void AddPlan(CLI::App& app, CliContext& ctx);

// queue_command.cc: `tessera queue`: the waiting jobs in the order tesserad
// offers them devices (priority, then each user's weighted device share, then
// submission): position, job, user, priority, the user's share, and why the
// job still waits. Other users' jobs show their place and user only.
//
// Adds the `queue` subcommand to `app`.
void AddQueue(CLI::App& app, CliContext& ctx);

// entrypoint_commands.cc: `tessera entrypoints [list | add NAME [--command P]
// [--description D] | rm NAME]`: the entrypoint allow-list (add and rm are for
// admins); `entrypoints` alone lists.
//
// Adds the `entrypoints` subcommand and its subcommands to `app`.
void AddEntrypoints(CLI::App& app, CliContext& ctx);

// trace_command.cc: `tessera trace [--owner U] [--out FILE]`: every job the
// caller may see (all pages of GET /api/v1/jobs; an admin's: every user's) as
// a trace for the scheduler simulator (cli/trace_export.h), on stdout or in
// FILE.
//
// Adds the `trace` subcommand to `app`.
void AddTrace(CLI::App& app, CliContext& ctx);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_COMMANDS_H_
