// `tessera trace`: the jobs the caller may see as a simulator trace
// (cli/trace_export.h), every page of GET /api/v1/jobs.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "cli/api_call.h"
#include "cli/commands.h"
#include "cli/trace_export.h"
#include "common/atomic_file.h"
#include "common/file_system.h"

namespace tessera::cli {

using api::Json;

void AddTrace(CLI::App& app, CliContext& ctx) {
  struct Flags {
    std::string owner, out;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "trace", "the jobs you may see as a trace for the scheduler simulator (trace_sim --trace)");
  cmd->add_option("--owner", f->owner, "only jobs of this user (admins)");
  cmd->add_option("--out", f->out, "write the CSV to this file (default: stdout)");
  cmd->callback([&ctx, f, cmd] {
    std::vector<Json> jobs;
    Json after;  // the next page's cursor
    while (true) {
      std::string target = "/api/v1/jobs";
      AppendQuery(target, "limit", "500");
      if (cmd->count("--owner")) AppendQuery(target, "owner", f->owner);
      if (after.is_number()) AppendQuery(target, "after", after.dump());
      Json page;
      ctx.exit_code = CallApi(ctx, "GET", target, "", &page);
      if (ctx.exit_code != kExitOk) return;
      for (const Json& j : page.value("jobs", Json::array())) jobs.push_back(j);
      after = page.value("next_after", Json());
      if (!after.is_number()) break;
    }
    const std::string csv = JobsAsTrace(jobs);
    if (f->out.empty()) {
      ctx.out << csv;
      return;
    }
    // Whole or not at all: a lab's trace is not left half written.
    if (Status st = WriteFileAtomically(*FileSystem::Default(), f->out, csv); !st.ok()) {
      PrintError(ctx.err, InvalidArgument("cannot write " + f->out + ": " + st.message(), "out"));
      ctx.exit_code = kExitUsage;
      return;
    }
    size_t left_out = 0;  // the '#' lines, one a job
    for (size_t at = 0; at < csv.size(); at = csv.find('\n', at) + 1) left_out += csv[at] == '#';
    ctx.out << "wrote " << jobs.size() - left_out << " jobs to " << f->out;
    if (left_out > 0) ctx.out << " (" << left_out << " left out: see its # lines)";
    ctx.out << "\n";
  });
}

}  // namespace tessera::cli
