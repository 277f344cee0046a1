#include "cli/cli_app.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>

#include "api/http_client.h"
#include "api/http_status.h"
#include "api/job_spec_validation.h"
#include "api/join_bundle.h"
#include "api/server_url.h"
#include "api/types.h"
#include "api/url.h"
#include "cli/job_spec_file.h"
#include "cli/progress_view.h"
#include "cli/text_table.h"
#include "cli/token_pointer.h"
#include "cli/training_view.h"

namespace tessera::cli {
namespace {

using api::Json;

void PrintError(std::ostream& err, const Status& st) {
  err << "error: ";
  if (!st.field().empty()) err << st.field() << ": ";
  err << st.message() << "\n";
}

// One API call: resolves the config, sends, turns the answer into JSON.
// Returns an exit code; *result holds the JSON body on success (null when
// the answer had no body).
int CallApi(CliContext& ctx, const std::string& method, const std::string& target,
            const std::string& body, Json* result) {
  Result<ClientConfig> config = ResolveClientConfig(ctx.flags, ctx.env);
  if (!config.ok()) {
    PrintError(ctx.err, config.status());
    return kExitUsage;
  }
  Result<api::ServerUrl> addr = api::ParseServerUrl(config->server, "server");
  if (!addr.ok()) {
    PrintError(ctx.err, addr.status());
    return kExitUsage;
  }
  api::HttpClient client(*addr, config->timeout,
                         api::TlsClientOptions{config->ca_file, config->ca_sha256});
  if (!config->token.empty()) client.SetBearerToken(config->token);
  Result<api::HttpResponse> res = client.Request(method, target, body);
  if (!res.ok()) {
    ctx.err << "error: cannot reach tesserad at " << config->server << ": "
            << res.status().message() << "\n";
    return kExitUnreachable;
  }
  if (res->status >= 400) {
    PrintError(ctx.err, api::StatusFromErrorBody(res->status, res->body));
    return kExitApiError;
  }
  *result = nullptr;
  if (!res->body.empty()) {
    *result = Json::parse(res->body, nullptr, /*allow_exceptions=*/false);
    if (result->is_discarded()) {
      ctx.err << "error: the server answered with invalid JSON\n";
      return kExitApiError;
    }
  }
  return kExitOk;
}

// ---- output ----

std::string Str(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  return it->dump();
}

int64_t Int(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return 0;
  return it->get<int64_t>();
}

std::string FormatBytes(int64_t bytes) {
  double gib = static_cast<double>(bytes) / (1024.0 * 1024 * 1024);
  std::ostringstream os;
  os.precision(1);
  os << std::fixed << gib << " GiB";
  return os.str();
}

// A measured speed in the unit that shows it (emulated devices measure the
// CPU they run on): "312.0 TFLOPS", "41.3 GFLOPS", "850.0 MFLOPS"; "-" when
// not measured.
std::string FormatFlops(double tflops) {
  if (!(tflops > 0)) return "-";
  char buf[64];
  if (tflops >= 1) {
    std::snprintf(buf, sizeof(buf), "%.1f TFLOPS", tflops);
  } else if (tflops >= 1e-3) {
    std::snprintf(buf, sizeof(buf), "%.1f GFLOPS", tflops * 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f MFLOPS", tflops * 1e6);
  }
  return buf;
}

// Prints rows as a table with aligned columns; the first row is the header.
void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  out << FormatTable(rows);
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
                   {"attempt:", Str(job, "attempt") + " of " + Str(spec, "max_attempts")},
                   {"created:", FormatUtc(Int(job, "created_ms"))},
                   {"updated:", FormatUtc(Int(job, "updated_ms"))}});
  if (job.contains("plan") && !job["plan"].is_null()) out << "plan: " << job["plan"].dump() << "\n";
  if (job.contains("progress") && !job["progress"].is_null()) {
    out << "progress: " << job["progress"].dump() << "\n";
  }
  if (job.contains("inference") && job["inference"].is_object()) {
    auto p = api::InferenceProgressFromJson(job["inference"]);
    if (p.ok()) out << FormatInferenceProgress(*p, terminal);
  }
}

// ---- plans (scheduler/plan_json.h shapes) ----

std::string Fixed(const Json& j, const char* key, const char* fmt) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, it->get<double>());
  return buf;
}

// A plan's devices, replica by replica: "a:0,a:1,b:0"; long lists are cut ("a:0,a:1,... (12)").
std::string PlanDevices(const Json& plan) {
  std::vector<std::string> ids;
  if (plan.is_object() && plan.contains("replicas") && plan["replicas"].is_array()) {
    for (const Json& r : plan["replicas"]) {
      if (!r.is_object() || !r.contains("stages") || !r["stages"].is_array()) continue;
      for (const Json& s : r["stages"]) {
        if (!s.is_object() || !s.contains("devices") || !s["devices"].is_array()) continue;
        for (const Json& d : s["devices"]) {
          if (d.is_string()) ids.push_back(d.get<std::string>());
        }
      }
    }
  }
  constexpr size_t kShown = 6;
  std::string out;
  for (size_t i = 0; i < ids.size() && i < kShown; ++i) out += (i ? "," : "") + ids[i];
  if (ids.size() > kShown) out += ",... (" + std::to_string(ids.size()) + ")";
  return out.empty() ? "-" : out;
}

// `tessera plan`: one row per plan, best first; then the hand-made baselines with the
// best plan's speedup over each; then why other layouts lost.
void PrintPlanSet(std::ostream& out, const Json& set) {
  const Json none = Json::array();
  auto list = [&](const char* key) -> const Json& {
    return set.is_object() && set.contains(key) && set[key].is_array() ? set[key] : none;
  };
  std::vector<std::vector<std::string>> rows = {
      {"#", "LAYOUT", "DEVICES", "MICRO-BATCHES", "STEP S", "SAMPLES/S", "WHY"}};
  int n = 0;
  for (const Json& p : list("plans")) {
    if (!p.is_object()) continue;
    rows.push_back({std::to_string(++n), Str(p, "layout"), PlanDevices(p), Str(p, "micro_batches"),
                    Fixed(p.value("predicted", Json::object()), "step_s", "%.4g"),
                    Fixed(p.value("predicted", Json::object()), "samples_per_s", "%.1f"),
                    Str(p, "why")});
  }
  if (n == 0) {
    out << "no plan\n";
  } else {
    PrintTable(out, rows);
  }
  if (!list("baselines").empty()) {
    out << "\nhand-made baselines (SPEEDUP: the best plan over each):\n";
    std::vector<std::vector<std::string>> base = {
        {"BASELINE", "DESCRIPTION", "DEVICES", "STEP S", "SPEEDUP"}};
    for (const Json& b : list("baselines")) {
      if (!b.is_object()) continue;
      const bool feasible = b.value("feasible", false);
      base.push_back(
          {Str(b, "name"), Str(b, "description"),
           feasible ? PlanDevices(b.value("plan", Json())) : "-",
           feasible ? Fixed(b, "step_s", "%.4g") : "-",
           feasible ? Fixed(b, "speedup", "%.2fx") : "does not fit: " + Str(b, "reason")});
    }
    PrintTable(out, base);
  }
  if (!list("rejected").empty()) {
    out << "\nwhy other layouts lost:\n";
    for (const Json& r : list("rejected")) {
      if (r.is_object()) out << "  " << Str(r, "layout") << ": " << Str(r, "reason") << "\n";
    }
  }
}

// Prints `result` as JSON (--json) or with `human`.
template <typename Human>
void Emit(CliContext& ctx, const Json& result, Human human) {
  if (ctx.json) {
    ctx.out << result.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
  } else {
    human(result);
  }
}

Result<int64_t> ParseJobId(const std::string& text) {
  int64_t id = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || id <= 0) {
    return InvalidArgument("must be a positive job id", "id");
  }
  return id;
}

// Every point of a job's metrics history with step > since (all when since
// < 0), of one rank and attempt when given, following next_since page by
// page. Returns an exit code.
int FetchMetrics(CliContext& ctx, int64_t id, std::optional<int64_t> rank,
                 std::optional<int64_t> attempt, int64_t since,
                 std::vector<api::MetricPoint>* out) {
  for (int pages = 0; pages < 10000; ++pages) {
    std::string target = "/api/v1/jobs/" + std::to_string(id) +
                         "/metrics?limit=" + std::to_string(api::kMaxMetricsPageSize);
    if (rank) target += "&rank=" + std::to_string(*rank);
    if (attempt) target += "&attempt=" + std::to_string(*attempt);
    if (since >= 0) target += "&since=" + std::to_string(since);
    Json body;
    if (int code = CallApi(ctx, "GET", target, "", &body); code != kExitOk) return code;
    Result<api::MetricsPage> page = api::MetricsPageFromJson(body);
    if (!page.ok()) {
      PrintError(ctx.err, page.status().WithPrefix("the server's metrics page"));
      return kExitApiError;
    }
    out->insert(out->end(), page->points.begin(), page->points.end());
    if (!page->next_since || *page->next_since <= since) break;
    since = *page->next_since;
  }
  return kExitOk;
}

// What `job ID --watch` keeps between polls of a training job: the whole
// history, read once (and again when a new attempt begins, as it may repeat
// steps), then the current attempt's steps after the last one each of its
// ranks reported (ranks report through different agents, so one may lag).
struct TrainingWatch {
  // Ranks more than this many steps behind the others are not waited for.
  static constexpr int64_t kMaxLag = 200;

  std::map<std::tuple<int64_t, int64_t, int64_t>, api::MetricPoint>
      points;            // (step, attempt, rank)
  int64_t attempt = -1;  // the job's attempt when the history was read
  std::map<int64_t, RankDevice> devices;
  Json nodes = Json::array();
  bool nodes_fetched = false;

  int Update(CliContext& ctx, const Json& job) {
    const int64_t id = Int(job, "id");
    if (!nodes_fetched) {
      nodes_fetched = true;
      Json body;
      if (CallApi(ctx, "GET", "/api/v1/nodes", "", &body) == kExitOk && body.is_object()) {
        nodes = body.value("nodes", Json::array());
      }
    }
    devices = RankDevicesOf(job.value("plan", Json()), nodes);
    std::vector<api::MetricPoint> fresh;
    int code = kExitOk;
    if (Int(job, "attempt") != attempt) {
      attempt = Int(job, "attempt");
      points.clear();
      code = FetchMetrics(ctx, id, std::nullopt, std::nullopt, -1, &fresh);
    } else {
      code = FetchMetrics(ctx, id, std::nullopt, attempt, SinceForAttempt(), &fresh);
    }
    if (code != kExitOk) return code;
    for (api::MetricPoint& p : fresh) points[{p.step, p.attempt, p.rank}] = std::move(p);
    return kExitOk;
  }

  // The lowest of the current attempt's ranks' last steps; -1 before any.
  int64_t SinceForAttempt() const {
    std::map<int64_t, int64_t> last;  // rank -> step
    for (const auto& [key, p] : points) {
      if (p.attempt == attempt) last[p.rank] = std::max(last[p.rank], p.step);
    }
    if (last.empty()) return -1;
    int64_t newest = 0, since = INT64_MAX;
    for (const auto& [rank, step] : last) {
      newest = std::max(newest, step);
      since = std::min(since, step);
    }
    return std::max(since, newest - kMaxLag);
  }

  std::string Frame() const {
    std::vector<api::MetricPoint> list;
    for (const auto& [key, p] : points) list.push_back(p);
    return LossLines(list, 40) + RankTable(list, devices);
  }
};

bool IsTrainJob(const Json& job) {
  return job.is_object() && job.value("spec", Json::object()).value("kind", "train") == "train";
}

// ---- commands ----

struct SubmitFlags {
  std::string file;
  std::string name, kind, entrypoint, dataset, output, checkpoint, layout;
  int64_t global_batch = 0, steps = 0, checkpoint_every_s = 0, priority = 0, max_attempts = 0,
          min_devices = 0, max_devices = 0, image_width = 0, image_height = 0;
  std::vector<std::string> args;
  std::vector<std::string> env;
  bool dry_run = false;
};

// Builds the spec from FILE (if any) and the flags given (flags win).
Result<api::JobSpec> BuildSpec(CLI::App& cmd, const SubmitFlags& f) {
  api::JobSpec spec;
  if (!f.file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(spec, LoadJobSpecFile(f.file));
  }
  auto given = [&](const char* name) { return cmd.count(name) > 0; };
  if (given("--name")) spec.name = f.name;
  if (given("--kind")) {
    auto kind = api::ParseJobKind(f.kind);
    if (!kind) return InvalidArgument("must be train or infer", "kind");
    spec.kind = *kind;
  }
  if (given("--entrypoint")) spec.entrypoint = f.entrypoint;
  if (given("--dataset")) spec.dataset = f.dataset;
  if (given("--output")) spec.output = f.output;
  if (given("--checkpoint")) spec.checkpoint = f.checkpoint;
  if (given("--layout")) spec.layout = f.layout;
  if (given("--global-batch")) spec.global_batch = f.global_batch;
  if (given("--steps")) spec.steps = f.steps;
  if (given("--checkpoint-every-s")) spec.checkpoint_every_s = f.checkpoint_every_s;
  if (given("--priority")) spec.priority = f.priority;
  if (given("--max-attempts")) spec.max_attempts = f.max_attempts;
  if (given("--min-devices")) spec.min_devices = f.min_devices;
  if (given("--max-devices")) spec.max_devices = f.max_devices;
  if (given("--image-width")) spec.image_width = f.image_width;
  if (given("--image-height")) spec.image_height = f.image_height;
  if (given("--arg")) spec.args = f.args;
  for (const std::string& kv : f.env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return InvalidArgument("must be KEY=VALUE", "env");
    spec.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  TESSERA_RETURN_IF_ERROR(api::ValidateJobSpec(spec));
  return spec;
}

void AddSpecFlags(CLI::App* cmd, SubmitFlags* f) {
  cmd->add_option("file", f->file, "job spec file (.json or .yaml; - for stdin)");
  cmd->add_option("--name", f->name, "job name");
  cmd->add_option("--kind", f->kind, "train or infer");
  cmd->add_option("--entrypoint", f->entrypoint, "builtin:<model> or cmd:<registered name>");
  cmd->add_option("--dataset", f->dataset, "input folder or list file (absolute path)");
  cmd->add_option("--output", f->output, "infer: output folder (absolute path)");
  cmd->add_option("--checkpoint", f->checkpoint, "infer: checkpoint to load");
  cmd->add_option("--layout", f->layout, "auto|data|pipeline|hybrid|tiled");
  cmd->add_option("--global-batch", f->global_batch, "global batch size");
  cmd->add_option("--steps", f->steps, "training steps");
  cmd->add_option("--checkpoint-every-s", f->checkpoint_every_s, "seconds between checkpoints");
  cmd->add_option("--priority", f->priority, "-1000..1000");
  cmd->add_option("--max-attempts", f->max_attempts, "attempts before the job fails");
  cmd->add_option("--min-devices", f->min_devices, "fewest devices to run on");
  cmd->add_option("--max-devices", f->max_devices, "most devices (0: no limit)");
  cmd->add_option("--image-width", f->image_width, "infer: width of the largest scans (px)");
  cmd->add_option("--image-height", f->image_height, "infer: height of the largest scans (px)");
  cmd->add_option("--arg", f->args, "argument for the entrypoint (repeatable)");
  cmd->add_option("--env", f->env, "KEY=VALUE for every rank (repeatable)");
}

void AddSubmit(CLI::App& app, CliContext& ctx) {
  auto f = std::make_shared<SubmitFlags>();
  CLI::App* cmd = app.add_subcommand("submit", "submit a job from a spec file and/or flags");
  AddSpecFlags(cmd, f.get());
  cmd->callback([&ctx, f, cmd] {
    Result<api::JobSpec> spec = BuildSpec(*cmd, *f);
    if (!spec.ok()) {
      PrintError(ctx.err, spec.status());
      ctx.exit_code = kExitUsage;
      return;
    }
    Json job;
    ctx.exit_code = CallApi(ctx, "POST", "/api/v1/jobs", api::DumpJson(api::ToJson(*spec)), &job);
    if (ctx.exit_code != kExitOk) return;
    Emit(ctx, job, [&](const Json& j) {
      ctx.out << "submitted job " << Str(j, "id") << " (" << Str(j, "state") << ")\n";
    });
  });
}

void AddPlan(CLI::App& app, CliContext& ctx) {
  auto f = std::make_shared<SubmitFlags>();
  CLI::App* cmd = app.add_subcommand("plan", "dry run: show the plans the scheduler would pick");
  AddSpecFlags(cmd, f.get());
  cmd->callback([&ctx, f, cmd] {
    Result<api::JobSpec> spec = BuildSpec(*cmd, *f);
    if (!spec.ok()) {
      PrintError(ctx.err, spec.status());
      ctx.exit_code = kExitUsage;
      return;
    }
    // While tesserad measures the model's profile it answers that state
    // (202): say so on stderr and ask again when it suggests.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(15);
    std::string said;
    Json plans;
    while (true) {
      ctx.exit_code =
          CallApi(ctx, "POST", "/api/v1/plans", api::DumpJson(api::ToJson(*spec)), &plans);
      if (ctx.exit_code != kExitOk) return;
      if (!plans.is_object() || Str(plans, "state") != "measuring_profile") break;
      if (std::chrono::steady_clock::now() > give_up) {
        ctx.err << "error: the model profile is still being measured; try again later\n";
        ctx.exit_code = kExitApiError;
        return;
      }
      const std::string message = Str(plans, "message");
      if (message != said) ctx.err << message << "; waiting\n" << std::flush;
      said = message;
      const int64_t retry_ms = std::clamp<int64_t>(Int(plans, "retry_after_s") * 1000, 100, 30'000);
      std::this_thread::sleep_for(std::chrono::milliseconds(retry_ms));
    }
    Emit(ctx, plans, [&](const Json& set) { PrintPlanSet(ctx.out, set); });
  });
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
    std::string query;
    auto add = [&](const char* name, const std::string& value) {
      query += query.empty() ? "?" : "&";
      query += std::string(name) + "=" + api::PercentEncode(value);
    };
    if (cmd->count("--state")) add("state", f->state);
    if (cmd->count("--owner")) add("owner", f->owner);
    if (cmd->count("--limit")) add("limit", std::to_string(f->limit));
    if (cmd->count("--after")) add("after", std::to_string(f->after));
    Json page;
    ctx.exit_code = CallApi(ctx, "GET", "/api/v1/jobs" + query, "", &page);
    if (ctx.exit_code != kExitOk) return;
    Emit(ctx, page, [&](const Json& p) {
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
  auto id = std::make_shared<std::string>();
  auto watch = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(name, help);
  cmd->add_option("id", *id, "job id")->required();
  if (std::string_view(method) == "GET") {
    cmd->add_flag("--watch", *watch,
                  "follow the job until it ends: an infer job's progress bar, a training job's "
                  "loss and per-rank step time split and memory");
  }
  cmd->callback([&ctx, id, watch, method, suffix, name] {
    Result<int64_t> parsed = ParseJobId(*id);
    if (!parsed.ok()) {
      PrintError(ctx.err, parsed.status());
      ctx.exit_code = kExitUsage;
      return;
    }
    const std::string target = "/api/v1/jobs/" + std::to_string(*parsed) + suffix;
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
  });
}

void AddMetrics(CLI::App& app, CliContext& ctx) {
  struct Flags {
    std::string id;
    int64_t rank = 0;
    bool csv = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("metrics", "a training job's history, step by step");
  cmd->add_option("id", f->id, "job id")->required();
  cmd->add_option("--rank", f->rank, "only this rank");
  cmd->add_flag("--csv", f->csv, "comma-separated values with a header line");
  cmd->callback([&ctx, f, cmd] {
    Result<int64_t> id = ParseJobId(f->id);
    if (!id.ok()) {
      PrintError(ctx.err, id.status());
      ctx.exit_code = kExitUsage;
      return;
    }
    std::optional<int64_t> rank;
    if (cmd->count("--rank")) rank = f->rank;
    std::vector<api::MetricPoint> points;
    ctx.exit_code = FetchMetrics(ctx, *id, rank, std::nullopt, -1, &points);
    if (ctx.exit_code != kExitOk) return;
    if (f->csv) {
      ctx.out << MetricsCsv(points);
      return;
    }
    api::MetricsPage all;
    all.job_id = *id;
    all.points = points;
    Emit(ctx, api::ToJson(all), [&](const Json&) {
      if (points.empty()) {
        ctx.out << "no metrics recorded for job " << *id << "\n";
      } else {
        ctx.out << MetricsTable(points);
      }
    });
  });
}

void AddEvents(CLI::App& app, CliContext& ctx) {
  struct Flags {
    std::string id;
    int64_t after = 0, limit = 0;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("events", "state changes of a job");
  cmd->add_option("id", f->id, "job id")->required();
  cmd->add_option("--after", f->after, "only events with id > AFTER");
  cmd->add_option("--limit", f->limit, "at most this many (1..1000)");
  cmd->callback([&ctx, f, cmd] {
    Result<int64_t> id = ParseJobId(f->id);
    if (!id.ok()) {
      PrintError(ctx.err, id.status());
      ctx.exit_code = kExitUsage;
      return;
    }
    std::string target = "/api/v1/jobs/" + std::to_string(*id) + "/events";
    std::string sep = "?";
    if (cmd->count("--after")) {
      target += sep + "after=" + std::to_string(f->after);
      sep = "&";
    }
    if (cmd->count("--limit")) target += sep + "limit=" + std::to_string(f->limit);
    Json events;
    ctx.exit_code = CallApi(ctx, "GET", target, "", &events);
    if (ctx.exit_code != kExitOk) return;
    Emit(ctx, events, [&](const Json& e) {
      std::vector<std::vector<std::string>> rows = {{"TIME", "FROM", "TO", "ATTEMPT", "REASON"}};
      for (const Json& ev : e.value("events", Json::array())) {
        std::string from = Str(ev, "from");
        rows.push_back({FormatUtc(Int(ev, "ts_ms")), from.empty() ? "-" : from, Str(ev, "to"),
                        Str(ev, "attempt"), Str(ev, "reason")});
      }
      PrintTable(ctx.out, rows);
    });
  });
}

void AddLogs(CLI::App& app, CliContext& ctx) {
  struct Flags {
    std::string id;
    int64_t rank = 0, tail = 100;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("logs", "last lines of one rank's log");
  cmd->add_option("id", f->id, "job id")->required();
  cmd->add_option("--rank", f->rank, "rank (default 0)");
  cmd->add_option("--tail", f->tail, "lines (1..100, default 100)");
  cmd->callback([&ctx, f] {
    Result<int64_t> id = ParseJobId(f->id);
    if (!id.ok()) {
      PrintError(ctx.err, id.status());
      ctx.exit_code = kExitUsage;
      return;
    }
    Json logs;
    ctx.exit_code =
        CallApi(ctx, "GET",
                "/api/v1/jobs/" + std::to_string(*id) + "/logs?rank=" + std::to_string(f->rank) +
                    "&tail=" + std::to_string(f->tail),
                "", &logs);
    if (ctx.exit_code != kExitOk) return;
    Emit(ctx, logs, [&](const Json& l) {
      for (const Json& line : l.value("lines", Json::array())) {
        if (line.is_string()) ctx.out << line.get<std::string>() << "\n";
      }
    });
  });
}

// tessera nodes enrolments | revoke NAME | readmit NAME | join-bundle (admin).
void AddNodeIdentityCommands(CLI::App& nodes, CliContext& ctx) {
  auto name = std::make_shared<std::string>();
  auto controller = std::make_shared<std::string>();
  nodes.add_subcommand("enrolments", "every node's enrolment and credential state (admin)")
      ->callback([&ctx] {
        Json list;
        ctx.exit_code = CallApi(ctx, "GET", "/api/v1/nodes/enrolments", "", &list);
        if (ctx.exit_code != kExitOk) return;
        Emit(ctx, list, [&](const Json& l) {
          std::vector<std::vector<std::string>> rows = {
              {"NODE", "STATE", "CREDENTIAL", "ENROLLED", "REVOKED"}};
          for (const Json& e : l.value("enrolments", Json::array())) {
            const Json revoked = e.value("revoked_ms", Json());
            rows.push_back({Str(e, "node"), Str(e, "state"), Str(e, "credential_id"),
                            FormatUtc(Int(e, "enrolled_ms")),
                            revoked.is_number() ? FormatUtc(revoked.get<int64_t>()) : "-"});
          }
          PrintTable(ctx.out, rows);
        });
      });
  CLI::App* revoke = nodes.add_subcommand(
      "revoke", "revoke a node's credential: its heartbeats are refused at once (admin)");
  revoke->add_option("name", *name, "node name")->required();
  revoke->callback([&ctx, name] {
    Json none;
    ctx.exit_code = CallApi(ctx, "DELETE", "/api/v1/nodes/" + api::PercentEncode(*name), "", &none);
    if (ctx.exit_code != kExitOk) return;
    Emit(ctx, Json{{"revoked", *name}}, [&](const Json&) {
      ctx.out << "revoked node " << *name << "; it may enrol again only after `tessera nodes "
              << "readmit " << *name << "`\n";
    });
  });
  CLI::App* readmit =
      nodes.add_subcommand("readmit", "let a revoked node enrol again with the join token (admin)");
  readmit->add_option("name", *name, "node name")->required();
  readmit->callback([&ctx, name] {
    Json none;
    ctx.exit_code =
        CallApi(ctx, "POST", "/api/v1/nodes/" + api::PercentEncode(*name) + "/readmit", "", &none);
    if (ctx.exit_code != kExitOk) return;
    Emit(ctx, Json{{"readmitted", *name}},
         [&](const Json&) { ctx.out << "node " << *name << " may enrol again\n"; });
  });
  CLI::App* bundle = nodes.add_subcommand(
      "join-bundle",
      "print what a new node needs (controller URL, CA fingerprint, join token; admin; secret)");
  bundle->add_option("--controller", *controller,
                     "the URL agents reach tesserad at (default: this CLI's server)");
  bundle->callback([&ctx, controller] {
    Json parts;
    ctx.exit_code = CallApi(ctx, "GET", "/api/v1/agent/join-bundle", "", &parts);
    if (ctx.exit_code != kExitOk) return;
    api::JoinBundle b;
    b.controller = *controller;
    if (b.controller.empty()) {
      auto config = ResolveClientConfig(ctx.flags, ctx.env);
      if (config.ok()) b.controller = config->server;
    }
    b.join_token = parts.value("join_token", "");
    if (parts.contains("ca_sha256") && parts["ca_sha256"].is_string()) {
      b.ca_sha256 = parts["ca_sha256"].get<std::string>();
    }
    Json shown = {{"controller", b.controller},
                  {"ca_sha256", parts.value("ca_sha256", Json())},
                  {"join_token", b.join_token}};
    Emit(ctx, shown, [&](const Json&) { ctx.out << api::FormatJoinBundle(b); });
  });
}

void AddNodes(CLI::App& app, CliContext& ctx) {
  CLI::App* cmd = app.add_subcommand("nodes", "nodes and their devices");
  AddNodeIdentityCommands(*cmd, ctx);
  cmd->callback([&ctx, cmd] {
    if (!cmd->get_subcommands().empty()) return;  // enrolments, revoke, ...
    Json nodes;
    ctx.exit_code = CallApi(ctx, "GET", "/api/v1/nodes", "", &nodes);
    if (ctx.exit_code != kExitOk) return;
    Emit(ctx, nodes, [&](const Json& n) {
      std::vector<std::vector<std::string>> rows = {
          {"NODE", "HEALTH", "DEVICE", "NAME", "MEMORY", "UTIL", "SPEED", "HALF", "BUSY"}};
      std::vector<std::string> notes;  // devices the agent could not measure, with why
      for (const Json& node : n.value("nodes", Json::array())) {
        const Json devices = node.value("devices", Json::array());
        if (devices.empty()) {
          rows.push_back(
              {Str(node, "name"), Str(node, "health"), "-", "-", "-", "-", "-", "-", "-"});
        }
        for (const Json& d : devices) {
          std::ostringstream util;
          util << static_cast<int>(d.value("utilization", 0.0) * 100) << "%";
          rows.push_back({Str(node, "name"), Str(node, "health"),
                          Str(d, "type") + ":" + Str(d, "index"), Str(d, "name"),
                          FormatBytes(Int(d, "memory_bytes")), util.str(),
                          FormatFlops(d.value("measured_tflops", 0.0)),
                          FormatFlops(d.value("measured_tflops_half", 0.0)),
                          d.value("busy", false) ? "yes" : "no"});
          if (!Str(d, "measure_error").empty()) {
            notes.push_back(Str(node, "name") + " " + Str(d, "type") + ":" + Str(d, "index") +
                            " not measured, the planner leaves it out: " + Str(d, "measure_error"));
          }
        }
      }
      PrintTable(ctx.out, rows);
      for (const std::string& note : notes) ctx.out << note << "\n";
    });
  });
}

void AddEntrypoints(CLI::App& app, CliContext& ctx) {
  struct Flags {
    std::string name, command, description;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("entrypoints", "the entrypoint allow-list");
  auto list = [&ctx] {
    Json eps;
    ctx.exit_code = CallApi(ctx, "GET", "/api/v1/entrypoints", "", &eps);
    if (ctx.exit_code != kExitOk) return;
    Emit(ctx, eps, [&](const Json& e) {
      std::vector<std::vector<std::string>> rows = {{"NAME", "COMMAND", "DESCRIPTION"}};
      for (const Json& ep : e.value("entrypoints", Json::array())) {
        rows.push_back({Str(ep, "name"), Str(ep, "command"), Str(ep, "description")});
      }
      PrintTable(ctx.out, rows);
    });
  };
  cmd->add_subcommand("list", "list allowed entrypoints")->callback(list);
  CLI::App* add = cmd->add_subcommand("add", "allow an entrypoint (admin)");
  add->add_option("name", f->name, "builtin:<model> or cmd:<name>")->required();
  add->add_option("--command", f->command, "cmd: absolute path of the executable");
  add->add_option("--description", f->description, "what it is");
  add->callback([&ctx, f] {
    Json body = {{"name", f->name}, {"command", f->command}, {"description", f->description}};
    Json ep;
    ctx.exit_code = CallApi(ctx, "POST", "/api/v1/entrypoints", api::DumpJson(body), &ep);
    if (ctx.exit_code != kExitOk) return;
    Emit(ctx, ep, [&](const Json&) { ctx.out << "allowed " << f->name << "\n"; });
  });
  CLI::App* rm = cmd->add_subcommand("rm", "remove an entrypoint (admin)");
  rm->add_option("name", f->name, "entrypoint name")->required();
  rm->callback([&ctx, f] {
    Json none;
    ctx.exit_code =
        CallApi(ctx, "DELETE", "/api/v1/entrypoints/" + api::PercentEncode(f->name), "", &none);
    if (ctx.exit_code != kExitOk) return;
    Emit(ctx, Json{{"removed", f->name}},
         [&](const Json&) { ctx.out << "removed " << f->name << "\n"; });
  });
  // `tessera entrypoints` alone lists.
  cmd->callback([cmd, list] {
    if (cmd->get_subcommands().empty()) list();
  });
}

}  // namespace

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

  AddSubmit(app, ctx);
  AddJobs(app, ctx);
  AddJobCommand(app, ctx, "job", "show one job", "GET", "");
  AddJobCommand(app, ctx, "cancel", "cancel a job", "POST", "/cancel");
  AddEvents(app, ctx);
  AddLogs(app, ctx);
  AddMetrics(app, ctx);
  AddNodes(app, ctx);
  AddPlan(app, ctx);
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
