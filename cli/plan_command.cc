#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "api/http_status.h"
#include "cli/api_call.h"
#include "cli/commands.h"
#include "cli/output_format.h"
#include "cli/plan_view.h"
#include "cli/spec_flags.h"

namespace tessera::cli {
namespace {

using api::Json;

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
                    FormatNumber(p.value("predicted", Json::object()), "step_s", "%.4g"),
                    FormatNumber(p.value("predicted", Json::object()), "samples_per_s", "%.1f"),
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
           feasible ? FormatNumber(b, "step_s", "%.4g") : "-",
           feasible ? FormatNumber(b, "speedup", "%.2fx") : "does not fit: " + Str(b, "reason")});
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

}  // namespace

void AddPlan(CLI::App& app, CliContext& ctx) {
  auto run = [&ctx](const api::JobSpec& spec) {
    // While tesserad measures the model's profile it answers that state
    // (202): say so on stderr and ask again when it suggests.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(15);
    std::string said;
    Json plans;
    while (true) {
      ctx.exit_code =
          CallApi(ctx, "POST", "/api/v1/plans", api::DumpJson(api::ToJson(spec)), &plans);
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
  };
  AddSpecCommand(app, ctx, "plan", "dry run: show the plans the scheduler would pick", run);
}

}  // namespace tessera::cli
