#include <CLI/CLI.hpp>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "api/join_bundle.h"
#include "api/types.h"
#include "api/url.h"
#include "cli/api_call.h"
#include "cli/commands.h"
#include "cli/output_format.h"
#include "cli/text_table.h"

namespace tessera::cli {
namespace {

using api::Json;

// tessera nodes enrolments | revoke NAME | readmit NAME | join-bundle (admin).
void AddNodeIdentityCommands(CLI::App& nodes, CliContext& ctx) {
  auto name = std::make_shared<std::string>();
  auto controller = std::make_shared<std::string>();
  nodes.add_subcommand("enrolments", "every node's enrolment and credential state (admin)")
      ->callback([&ctx] {
        CallAndEmit(ctx, "GET", "/api/v1/nodes/enrolments", "", [&](const Json& l) {
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

}  // namespace

void AddNodes(CLI::App& app, CliContext& ctx) {
  CLI::App* cmd = app.add_subcommand("nodes", "nodes and their devices");
  AddNodeIdentityCommands(*cmd, ctx);
  cmd->callback([&ctx, cmd] {
    if (!cmd->get_subcommands().empty()) return;  // enrolments, revoke, ...
    CallAndEmit(ctx, "GET", "/api/v1/nodes", "", [&](const Json& n) {
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
          if (!Str(d, "profile_error").empty()) {
            notes.push_back(
                Str(node, "name") + " " + Str(d, "type") + ":" + Str(d, "index") +
                " planned from its benchmark, not its own profile: " + Str(d, "profile_error"));
          }
        }
      }
      PrintTable(ctx.out, rows);
      for (const std::string& note : notes) ctx.out << note << "\n";
    });
  });
}

}  // namespace tessera::cli
