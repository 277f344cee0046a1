#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/api_call.h"
#include "cli/commands.h"
#include "cli/output_format.h"
#include "cli/plan_view.h"

namespace tessera::cli {

using api::Json;

void AddQueue(CLI::App& app, CliContext& ctx) {
  app.add_subcommand("queue", "waiting jobs in the order they get devices, and why each waits")
      ->callback([&ctx] {
        CallAndEmit(ctx, "GET", "/api/v1/queue", "", [&](const Json& a) {
          const Json rows = a.value("queue", Json::array());
          if (rows.empty()) {
            ctx.out << "no job waits\n";
            return;
          }
          std::vector<std::vector<std::string>> table = {
              {"POS", "JOB", "USER", "PRIORITY", "USER SHARE", "WHY IT WAITS"}};
          for (const Json& r : rows) {
            const int64_t position = Int(r, "position");
            const Json id = r.value("id", Json());
            table.push_back({position > 0 ? std::to_string(position) : "held",
                             id.is_number() ? std::to_string(id.get<int64_t>()) : "-",
                             Str(r, "user"), Str(r, "priority"),
                             FormatNumber(r, "user_share", "%.2f"), Str(r, "reason")});
          }
          PrintTable(ctx.out, table);
        });
      });
}

}  // namespace tessera::cli
