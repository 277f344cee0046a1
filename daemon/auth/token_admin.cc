#include "daemon/auth/token_admin.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "daemon/store/sqlite_store.h"

namespace tessera::daemon {
namespace {

using Json = nlohmann::json;

struct TokenFlags {
  std::string db;
  std::string state_dir;
  std::string user;
  bool admin = false;
  bool json = false;
  std::string id;
};

std::string StorePath(const TokenFlags& f, const EnvGetter& env) {
  if (!f.db.empty()) return f.db;
  if (!f.state_dir.empty()) return (std::filesystem::path(f.state_dir) / "tessera.db").string();
  if (auto from_env = env("TESSERA_DB")) return *from_env;
  return "var/tesserad/tessera.db";
}

std::string Seconds(int64_t ms) { return std::to_string(ms / 1000); }

int Create(Store& store, const TokenFlags& f, std::ostream& out, std::ostream& err) {
  auto issued = store.CreateToken(f.user, f.admin ? api::Role::kAdmin : api::Role::kUser,
                                  SystemClock::Default()->NowUnixMillis());
  if (!issued.ok()) {
    err << "error: " << issued.status().ToString() << "\n";
    return kTokenAdminRefused;
  }
  if (f.json) {
    out << Json{{"id", issued->info.id},
                {"user", issued->info.user},
                {"role", api::RoleName(issued->info.role)},
                {"token", issued->plaintext}}
               .dump()
        << "\n";
  } else {
    out << issued->plaintext << "\n";
  }
  return kTokenAdminOk;
}

int List(Store& store, const TokenFlags& f, std::ostream& out, std::ostream& err) {
  auto tokens = store.ListTokens();
  if (!tokens.ok()) {
    err << "error: " << tokens.status().ToString() << "\n";
    return kTokenAdminRefused;
  }
  if (f.json) {
    Json rows = Json::array();
    for (const auto& t : *tokens) {
      rows.push_back({{"id", t.id},
                      {"user", t.user},
                      {"role", api::RoleName(t.role)},
                      {"created_ms", t.created_ms},
                      {"revoked_ms", t.revoked_ms ? Json(*t.revoked_ms) : Json()}});
    }
    out << rows.dump() << "\n";
    return kTokenAdminOk;
  }
  out << "ID                USER          ROLE   CREATED     REVOKED\n";
  for (const auto& t : *tokens) {
    char line[256];
    std::snprintf(line, sizeof line, "%-17s %-13s %-6s %-11s %s\n", t.id.c_str(), t.user.c_str(),
                  std::string(api::RoleName(t.role)).c_str(), Seconds(t.created_ms).c_str(),
                  t.revoked_ms ? Seconds(*t.revoked_ms).c_str() : "-");
    out << line;
  }
  return kTokenAdminOk;
}

int Revoke(Store& store, const TokenFlags& f, std::ostream& out, std::ostream& err) {
  Status st = store.RevokeToken(f.id, SystemClock::Default()->NowUnixMillis());
  if (!st.ok()) {
    err << "error: " << st.ToString() << "\n";
    return kTokenAdminRefused;
  }
  out << "revoked " << f.id << "\n";
  return kTokenAdminOk;
}

}  // namespace

std::optional<std::string> ProcessEnvironment(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

int RunTokenAdmin(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                  const EnvGetter& env) {
  TokenFlags f;
  CLI::App app{"tesserad token: API tokens on this controller's store", "tesserad token"};
  app.require_subcommand(1);
  auto* db = app.add_option("--db", f.db, "the controller's SQLite file (env TESSERA_DB)");
  app.add_option("--state-dir", f.state_dir, "the controller's state folder: <DIR>/tessera.db")
      ->excludes(db);

  CLI::App* create = app.add_subcommand("create", "create a token for USER (printed once)");
  create->add_option("user", f.user, "user name")->required();
  create->add_flag("--admin", f.admin, "the token has the admin role");
  create->add_flag("--json", f.json, "print {\"id\",\"user\",\"role\",\"token\"}");

  CLI::App* list = app.add_subcommand("list", "list tokens (no secrets)");
  list->add_flag("--json", f.json, "print a JSON array");

  CLI::App* revoke = app.add_subcommand("revoke", "revoke the token with this ID");
  revoke->add_option("id", f.id, "token id (from `tesserad token list`)")->required();

  // --db / --state-dir may follow the action too.
  for (CLI::App* action : {create, list, revoke}) action->fallthrough();

  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses from the back
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e, out, err);
    return code == 0 ? kTokenAdminOk : kTokenAdminUsage;
  }

  const std::string path = StorePath(f, env);
  auto opened = SqliteStore::Open(path);
  if (!opened.ok()) {
    err << "error: cannot open the store " << path << ": " << opened.status().message() << "\n";
    return kTokenAdminNoStore;
  }
  Store& store = **opened;
  if (create->parsed()) return Create(store, f, out, err);
  if (list->parsed()) return List(store, f, out, err);
  return Revoke(store, f, out, err);
}

}  // namespace tessera::daemon
