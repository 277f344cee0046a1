#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "api/http_status.h"
#include "api/types.h"
#include "cli/api_call.h"
#include "cli/commands.h"
#include "cli/output_format.h"
#include "cli/plan_view.h"
#include "cli/progress_view.h"
#include "cli/spec_flags.h"
#include "cli/text_table.h"
#include "cli/training_view.h"
#include "cli/training_watch.h"
#include "common/quantities.h"

namespace tessera::cli {
namespace {

using api::Json;

// "2 to 4", "1 or more", and whether tesserad may resize the running job.
std::string DevicesText(const Json& spec) {
  const int64_t max = Int(spec, "max_devices");
  std::string text = Str(spec, "min_devices") +
                     (max > 0 ? " to " + Str(spec, "max_devices") : std::string(" or more"));
  if (spec.value("elastic", true)) return text + ", elastic";
  return text + ", not elastic (keeps the devices it starts on)";
}

void PrintJobDetail(std::ostream& out, const Json& job, bool terminal) {
  const Json& spec = job.contains("spec") ? job["spec"] : Json::object();
  PrintTable(out, {{"id:", Str(job, "id")},
                   {"name:", Str(spec, "name")},
                   {"owner:", Str(job, "owner")},
                   {"state:", Str(job, "state")},
                   {"reason:", Str(job, "reason")},
                   {"kind:", Str(spec, "kind")},
                   {"entrypoint:", Str(spec, "entrypoint")},
                   {"global batch:", Str(spec, "global_batch")},
                   {"steps:", Str(spec, "steps")},
                   {"layout:", Str(spec, "layout")},
                   {"devices:", DevicesText(spec)},
                   {"attempt:", Str(job, "attempt") + " of " + Str(spec, "max_attempts")},
                   {"created:", FormatUtc(Int(job, "created_ms"))},
                   {"updated:", FormatUtc(Int(job, "updated_ms"))}});
  // A train rank's newest step (an infer rank's counts chunks: the inference
  // lines below say it).
  if (job.contains("progress") && job["progress"].is_object() && job["progress"].contains("step")) {
    const Json& p = job["progress"];
    std::string line = "step " + Str(p, "step");
    if (Int(spec, "steps") > 0) line += " of " + Str(spec, "steps");
    if (p.contains("loss")) line += ", loss " + FormatNumber(p, "loss", "%.4g");
    if (p.contains("samples_per_s")) {
      line += ", " + FormatNumber(p, "samples_per_s", "%.1f") + " samples/s";
    }
    out << "progress: " << line << "\n";
  }
  if (job.contains("plan") && job["plan"].is_object()) {
    out << "plan: ";
    PrintPlanDetail(out, job["plan"]);
  }
  if (job.contains("inference") && job["inference"].is_object()) {
    auto p = api::InferenceProgressFromJson(job["inference"]);
    if (p.ok()) out << FormatInferenceProgress(*p, terminal);
  }
}

Result<int64_t> ParseJobId(const std::string& text) {
  const std::optional<int64_t> id = ParseWholeNumber(text);
  if (!id || *id <= 0) return InvalidArgument("must be a positive job id", "id");
  return *id;
}

// Adds `name ID` to `app`. When it runs, `run` gets the subcommand (for its
// other options) and the job id; a bad id ends the command with a usage
// error naming "id". Returns the subcommand, to add its other options to.
CLI::App* AddJobIdCommand(CLI::App& app, CliContext& ctx, const char* name, const char* help,
                          std::function<void(const CLI::App& cmd, int64_t id)> run) {
  auto id = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(name, help);
  cmd->add_option("id", *id, "job id")->required();
  cmd->callback([&ctx, id, cmd, run = std::move(run)] {
    std::optional<int64_t> parsed = UsageChecked(ctx, ParseJobId(*id));
    if (parsed) run(*cmd, *parsed);
  });
  return cmd;
}

void AddSubmit(CLI::App& app, CliContext& ctx) {
  auto run = [&ctx](const api::JobSpec& spec) {
    CallAndEmit(ctx, "POST", "/api/v1/jobs", api::DumpJson(api::ToJson(spec)), [&](const Json& j) {
      ctx.out << "submitted job " << Str(j, "id") << " (" << Str(j, "state") << ")\n";
    });
  };
  AddSpecCommand(app, ctx, "submit", "submit a job from a spec file and/or flags", run);
}

void AddJobs(CLI::App& app, CliContext& ctx) {
  struct Flags {
    std::string state, owner;
    int64_t limit = 0, after = 0;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("jobs", "list jobs");
  cmd->add_option("--state", f->state, "only jobs in this state");
  cmd->add_option("--owner", f->owner, "only jobs of this user (admins)");
  cmd->add_option("--limit", f->limit, "at most this many (1..500)");
  cmd->add_option("--after", f->after, "cursor: jobs with id > AFTER");
  cmd->callback([&ctx, f, cmd] {
    std::string target = "/api/v1/jobs";
    if (cmd->count("--state")) AppendQuery(target, "state", f->state);
    if (cmd->count("--owner")) AppendQuery(target, "owner", f->owner);
    if (cmd->count("--limit")) AppendQuery(target, "limit", std::to_string(f->limit));
    if (cmd->count("--after")) AppendQuery(target, "after", std::to_string(f->after));
    CallAndEmit(ctx, "GET", target, "", [&](const Json& p) {
      std::vector<std::vector<std::string>> rows = {
          {"ID", "NAME", "OWNER", "KIND", "STATE", "ATTEMPT", "CREATED"}};
      for (const Json& job : p.value("jobs", Json::array())) {
        const Json spec = job.value("spec", Json::object());
        rows.push_back({Str(job, "id"), Str(spec, "name"), Str(job, "owner"), Str(spec, "kind"),
                        Str(job, "state"), Str(job, "attempt"), FormatUtc(Int(job, "created_ms"))});
      }
      PrintTable(ctx.out, rows);
      if (p.contains("next_after") && !p["next_after"].is_null()) {
        ctx.out << "more: tessera jobs --after " << p["next_after"].dump() << "\n";
      }
    });
  });
}

// `job ID`, `cancel ID`: one job in, one job out.
void AddJobCommand(CLI::App& app, CliContext& ctx, const char* name, const char* help,
                   const char* method, const char* suffix) {
  auto watch = std::make_shared<bool>(false);
  auto run = [&ctx, watch, method, suffix, name](const CLI::App&, int64_t id) {
    const std::string target = "/api/v1/jobs/" + std::to_string(id) + suffix;
    Json job;
    ctx.exit_code = CallApi(ctx, method, target, "", &job);
    if (ctx.exit_code != kExitOk) return;
    // A training job's watch also shows its history: loss and each rank.
    TrainingWatch training;
    const bool show_training = *watch && !ctx.json && IsTrainJob(job);
    size_t drawn_lines = 0;  // of the last frame, redrawn in place on a terminal
    while (*watch && !ctx.json) {
      auto state = api::ParseJobState(Str(job, "state"));
      if (state && api::IsTerminal(*state)) break;
      std::string frame = "job " + Str(job, "id") + " " + Str(job, "state");
      if (job.contains("inference") && job["inference"].is_object()) {
        auto p = api::InferenceProgressFromJson(job["inference"]);
        if (p.ok()) frame += "  " + InferenceProgressLine(*p, ctx.terminal);
      }
      if (show_training) {
        ctx.exit_code = training.Update(ctx, job);
        if (ctx.exit_code != kExitOk) return;
        frame += "\n" + training.Frame();
      }
      if (!frame.ends_with("\n")) frame += "\n";
      if (ctx.terminal) {
        // Back to the first line of the last frame, clear below, draw anew.
        if (drawn_lines > 0) ctx.out << "\x1b[" << drawn_lines << "F";
        ctx.out << "\x1b[J";
      }
      ctx.out << frame << std::flush;
      drawn_lines = static_cast<size_t>(std::count(frame.begin(), frame.end(), '\n'));
      std::this_thread::sleep_for(std::chrono::seconds(1));
      ctx.exit_code = CallApi(ctx, method, target, "", &job);
      if (ctx.exit_code != kExitOk) return;
    }
    Emit(ctx, job, [&](const Json& j) {
      if (std::string_view(name) == "cancel") {
        ctx.out << "job " << Str(j, "id") << " is " << Str(j, "state") << "\n";
      } else {
        PrintJobDetail(ctx.out, j, ctx.terminal);
      }
    });
    if (show_training) {
      ctx.exit_code = training.Update(ctx, job);
      if (ctx.exit_code != kExitOk) return;
      ctx.out << training.Frame();
    }
  };
  CLI::App* cmd = AddJobIdCommand(app, ctx, name, help, run);
  if (std::string_view(method) == "GET") {
    cmd->add_flag("--watch", *watch,
                  "follow the job until it ends: an infer job's progress bar, a training job's "
                  "loss and per-rank step time split and memory");
  }
}

void AddMetrics(CLI::App& app, CliContext& ctx) {
  struct Flags {
    int64_t rank = 0;
    bool csv = false;
  };
  auto f = std::make_shared<Flags>();
  auto run = [&ctx, f](const CLI::App& cmd, int64_t id) {
    std::optional<int64_t> rank;
    if (cmd.count("--rank")) rank = f->rank;
    std::vector<api::MetricPoint> points;
    ctx.exit_code = FetchMetrics(ctx, id, rank, std::nullopt, -1, &points);
    if (ctx.exit_code != kExitOk) return;
    if (f->csv) {
      ctx.out << MetricsCsv(points);
      return;
    }
    api::MetricsPage all;
    all.job_id = id;
    all.points = points;
    Emit(ctx, api::ToJson(all), [&](const Json&) {
      if (points.empty()) {
        ctx.out << "no metrics recorded for job " << id << "\n";
      } else {
        ctx.out << MetricsTable(points);
      }
    });
  };
  CLI::App* cmd =
      AddJobIdCommand(app, ctx, "metrics", "a training job's history, step by step", run);
  cmd->add_option("--rank", f->rank, "only this rank");
  cmd->add_flag("--csv", f->csv, "comma-separated values with a header line");
}

void AddEvents(CLI::App& app, CliContext& ctx) {
  struct Flags {
    int64_t after = 0, limit = 0;
  };
  auto f = std::make_shared<Flags>();
  auto run = [&ctx, f](const CLI::App& cmd, int64_t id) {
    std::string target = "/api/v1/jobs/" + std::to_string(id) + "/events";
    if (cmd.count("--after")) AppendQuery(target, "after", std::to_string(f->after));
    if (cmd.count("--limit")) AppendQuery(target, "limit", std::to_string(f->limit));
    CallAndEmit(ctx, "GET", target, "", [&](const Json& e) {
      std::vector<std::vector<std::string>> rows = {{"TIME", "FROM", "TO", "ATTEMPT", "REASON"}};
      for (const Json& ev : e.value("events", Json::array())) {
        std::string from = Str(ev, "from");
        rows.push_back({FormatUtc(Int(ev, "ts_ms")), from.empty() ? "-" : from, Str(ev, "to"),
                        Str(ev, "attempt"), Str(ev, "reason")});
      }
      PrintTable(ctx.out, rows);
    });
  };
  CLI::App* cmd = AddJobIdCommand(app, ctx, "events", "state changes of a job", run);
  cmd->add_option("--after", f->after, "only events with id > AFTER");
  cmd->add_option("--limit", f->limit, "at most this many (1..1000)");
}

void AddLogs(CLI::App& app, CliContext& ctx) {
  struct Flags {
    int64_t rank = 0, tail = 100;
  };
  auto f = std::make_shared<Flags>();
  auto run = [&ctx, f](const CLI::App&, int64_t id) {
    CallAndEmit(ctx, "GET",
                "/api/v1/jobs/" + std::to_string(id) + "/logs?rank=" + std::to_string(f->rank) +
                    "&tail=" + std::to_string(f->tail),
                "", [&](const Json& l) {
                  for (const Json& line : l.value("lines", Json::array())) {
                    if (line.is_string()) ctx.out << line.get<std::string>() << "\n";
                  }
                });
  };
  CLI::App* cmd = AddJobIdCommand(app, ctx, "logs", "last lines of one rank's log", run);
  cmd->add_option("--rank", f->rank, "rank (default 0)");
  cmd->add_option("--tail", f->tail, "lines (1..100, default 100)");
}

}  // namespace

void AddJobCommands(CLI::App& app, CliContext& ctx) {
  AddSubmit(app, ctx);
  AddJobs(app, ctx);
  AddJobCommand(app, ctx, "job", "show one job", "GET", "");
  AddJobCommand(app, ctx, "cancel", "cancel a job", "POST", "/cancel");
  AddEvents(app, ctx);
  AddLogs(app, ctx);
  AddMetrics(app, ctx);
}

}  // namespace tessera::cli
