#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "api/http_status.h"
#include "api/types.h"
#include "api/url.h"
#include "cli/api_call.h"
#include "cli/commands.h"
#include "cli/output_format.h"

namespace tessera::cli {

using api::Json;

void AddEntrypoints(CLI::App& app, CliContext& ctx) {
  struct Flags {
    std::string name, command, description;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("entrypoints", "the entrypoint allow-list");
  auto list = [&ctx] {
    CallAndEmit(ctx, "GET", "/api/v1/entrypoints", "", [&](const Json& e) {
      std::vector<std::vector<std::string>> rows = {{"NAME", "COMMAND", "DESCRIPTION"}};
      for (const Json& ep : e.value("entrypoints", Json::array())) {
        rows.push_back({Str(ep, "name"), Str(ep, "command"), Str(ep, "description")});
      }
      PrintTable(ctx.out, rows);
    });
  };
  cmd->add_subcommand("list", "list allowed entrypoints")->callback(list);
  CLI::App* add = cmd->add_subcommand("add", "allow an entrypoint (admin)");
  add->add_option("name", f->name, "builtin:<model>, cmd:<name> or model:<name>")->required();
  add->add_option("--command", f->command,
                  "cmd: absolute path of the executable; model: of the exported model file "
                  "(TorchScript .pt or AOTInductor .pt2)");
  add->add_option("--description", f->description, "what it is");
  add->callback([&ctx, f] {
    Json body = {{"name", f->name}, {"command", f->command}, {"description", f->description}};
    CallAndEmit(ctx, "POST", "/api/v1/entrypoints", api::DumpJson(body),
                [&](const Json&) { ctx.out << "allowed " << f->name << "\n"; });
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

}  // namespace tessera::cli
