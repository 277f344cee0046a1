#include "cli/token_commands.h"

#include <CLI/CLI.hpp>
#include <memory>

#include "common/clock.h"
#include "daemon/sqlite_store.h"

namespace tessera::cli {
namespace {

struct TokenFlags {
  std::string db;
  std::string user;
  bool admin = false;
  std::string id;
};

Result<std::unique_ptr<daemon::SqliteStore>> OpenStore(CliContext& ctx, const TokenFlags& f) {
  std::string path = f.db;
  if (path.empty()) {
    auto env = ctx.env("TESSERA_DB");
    path = env ? *env : "var/tesserad/tessera.db";
  }
  return daemon::SqliteStore::Open(path);
}

std::string Time(int64_t ms) { return std::to_string(ms / 1000); }

}  // namespace

void RegisterTokenCommands(CLI::App& app, CliContext& ctx) {
  auto f = std::make_shared<TokenFlags>();
  CLI::App* token = app.add_subcommand("token", "API tokens on the local controller store");
  token->require_subcommand(1);
  token->add_option("--db", f->db, "the controller's SQLite file (env TESSERA_DB)");

  CLI::App* create = token->add_subcommand("create", "create a token for USER");
  create->add_option("user", f->user, "user name")->required();
  create->add_flag("--admin", f->admin, "the token has the admin role");
  create->callback([&ctx, f] {
    auto store = OpenStore(ctx, *f);
    if (!store.ok()) {
      ctx.err << "error: " << store.status().message() << "\n";
      ctx.exit_code = kExitUnreachable;
      return;
    }
    auto issued = (*store)->CreateToken(f->user, f->admin ? api::Role::kAdmin : api::Role::kUser,
                                        SystemClock::Default()->NowUnixMillis());
    if (!issued.ok()) {
      ctx.err << "error: " << issued.status().ToString() << "\n";
      ctx.exit_code = kExitApiError;
      return;
    }
    if (ctx.json) {
      ctx.out << api::Json{{"id", issued->info.id},
                           {"user", issued->info.user},
                           {"role", api::RoleName(issued->info.role)},
                           {"token", issued->plaintext}}
                     .dump()
              << "\n";
    } else {
      ctx.out << issued->plaintext << "\n";
    }
  });

  CLI::App* list = token->add_subcommand("list", "list tokens (no secrets)");
  list->callback([&ctx, f] {
    auto store = OpenStore(ctx, *f);
    if (!store.ok()) {
      ctx.err << "error: " << store.status().message() << "\n";
      ctx.exit_code = kExitUnreachable;
      return;
    }
    auto tokens = (*store)->ListTokens();
    if (!tokens.ok()) {
      ctx.err << "error: " << tokens.status().ToString() << "\n";
      ctx.exit_code = kExitApiError;
      return;
    }
    api::Json out = api::Json::array();
    if (!ctx.json) ctx.out << "ID                USER          ROLE   CREATED     REVOKED\n";
    for (const auto& t : *tokens) {
      if (ctx.json) {
        out.push_back({{"id", t.id},
                       {"user", t.user},
                       {"role", api::RoleName(t.role)},
                       {"created_ms", t.created_ms},
                       {"revoked_ms", t.revoked_ms ? api::Json(*t.revoked_ms) : api::Json()}});
        continue;
      }
      char line[256];
      std::snprintf(line, sizeof line, "%-17s %-13s %-6s %-11s %s\n", t.id.c_str(), t.user.c_str(),
                    std::string(api::RoleName(t.role)).c_str(), Time(t.created_ms).c_str(),
                    t.revoked_ms ? Time(*t.revoked_ms).c_str() : "-");
      ctx.out << line;
    }
    if (ctx.json) ctx.out << out.dump() << "\n";
  });

  CLI::App* revoke = token->add_subcommand("revoke", "revoke the token with this ID");
  revoke->add_option("id", f->id, "token id (from `token list`)")->required();
  revoke->callback([&ctx, f] {
    auto store = OpenStore(ctx, *f);
    if (!store.ok()) {
      ctx.err << "error: " << store.status().message() << "\n";
      ctx.exit_code = kExitUnreachable;
      return;
    }
    Status st = (*store)->RevokeToken(f->id, SystemClock::Default()->NowUnixMillis());
    if (!st.ok()) {
      ctx.err << "error: " << st.ToString() << "\n";
      ctx.exit_code = kExitApiError;
      return;
    }
    ctx.out << "revoked " << f->id << "\n";
  });
}

}  // namespace tessera::cli
