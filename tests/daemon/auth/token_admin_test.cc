#include "daemon/auth/token_admin.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/clock.h"
#include "daemon/auth/api_tokens.h"
#include "daemon/store/sqlite_store.h"
#include "tests/daemon/temp_dir.h"

namespace tessera::daemon {
namespace {
namespace fs = std::filesystem;
using testing::TempDir;

struct Outcome {
  int code = -1;
  std::string out;
  std::string err;
};

// RunTokenAdmin with an environment of exactly `env`.
Outcome RunAdmin(const std::vector<std::string>& args,
                 std::map<std::string, std::string> env = {}) {
  std::ostringstream out, err;
  Outcome o;
  o.code = RunTokenAdmin(args, out, err, [env](const std::string& name) {
    auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  });
  o.out = out.str();
  o.err = err.str();
  return o;
}

// The user a plaintext token authenticates as in the store at `db`, or the
// error.
Result<TokenInfo> Authenticate(const std::string& db, const std::string& plaintext) {
  TESSERA_ASSIGN_OR_RETURN(auto store, SqliteStore::Open(db));
  return auth::AuthenticateApiToken(store.get(), plaintext);
}

// Changes the working folder for one scope.
class ScopedWorkingDir {
 public:
  explicit ScopedWorkingDir(const fs::path& dir) : previous_(fs::current_path()) {
    fs::current_path(dir);
  }
  ~ScopedWorkingDir() { fs::current_path(previous_); }

 private:
  fs::path previous_;
};

// ---- which store a command opens ----

struct StoreCase {
  std::string name;
  std::vector<std::string> args;           // "$DIR" stands for the test's folder
  std::map<std::string, std::string> env;  // likewise
  std::string expected_db;                 // relative to the test's folder
  bool run_in_dir = false;                 // the working folder is the test's folder
};

std::string Expand(std::string text, const fs::path& dir) {
  const std::string key = "$DIR";
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key)) {
    text.replace(at, key.size(), dir.string());
  }
  return text;
}

class TokenAdminStoreTest : public ::testing::TestWithParam<StoreCase> {};

TEST_P(TokenAdminStoreTest, CreatesTheTokenInTheChosenStore) {
  TempDir dir;
  fs::create_directories(dir.path() / "state");
  fs::create_directories(dir.path() / "var/tesserad");
  std::vector<std::string> args;
  for (const auto& a : GetParam().args) args.push_back(Expand(a, dir.path()));
  std::map<std::string, std::string> env;
  for (const auto& [k, v] : GetParam().env) env[k] = Expand(v, dir.path());

  Outcome o;
  {
    std::optional<ScopedWorkingDir> cwd;
    if (GetParam().run_in_dir) cwd.emplace(dir.path());
    o = RunAdmin(args, env);
  }
  ASSERT_EQ(o.code, kTokenAdminOk) << o.err;
  const std::string plaintext = o.out.substr(0, o.out.find('\n'));

  const std::string db = (dir.path() / GetParam().expected_db).string();
  auto info = Authenticate(db, plaintext);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->user, "alice");
  // No other candidate store was made.
  for (const char* other : {"a.db", "env.db", "state/tessera.db", "var/tesserad/tessera.db"}) {
    if (other == GetParam().expected_db) continue;
    EXPECT_FALSE(fs::exists(dir.path() / other)) << other;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, TokenAdminStoreTest,
    ::testing::Values(
        StoreCase{"Db", {"--db", "$DIR/a.db", "create", "alice"}, {}, "a.db"},
        StoreCase{"DbAfterTheAction", {"create", "alice", "--db", "$DIR/a.db"}, {}, "a.db"},
        StoreCase{
            "StateDir", {"--state-dir", "$DIR/state", "create", "alice"}, {}, "state/tessera.db"},
        StoreCase{"Environment", {"create", "alice"}, {{"TESSERA_DB", "$DIR/env.db"}}, "env.db"},
        StoreCase{"DbBeatsEnvironment",
                  {"--db", "$DIR/a.db", "create", "alice"},
                  {{"TESSERA_DB", "$DIR/env.db"}},
                  "a.db"},
        StoreCase{"StateDirBeatsEnvironment",
                  {"create", "alice", "--state-dir", "$DIR/state"},
                  {{"TESSERA_DB", "$DIR/env.db"}},
                  "state/tessera.db"},
        StoreCase{"DefaultUnderTheWorkingFolder",
                  {"create", "alice"},
                  {},
                  "var/tesserad/tessera.db",
                  /*run_in_dir=*/true}),
    [](const ::testing::TestParamInfo<StoreCase>& info) { return info.param.name; });

// ---- what each command prints and does ----

// A store with two tokens: bob (admin) and carol (user).
class TokenStoreBuilder {
 public:
  explicit TokenStoreBuilder(std::string db) : db_(std::move(db)) {}
  TokenStoreBuilder& WithToken(const std::string& user, api::Role role) {
    tokens_.emplace_back(user, role);
    return *this;
  }
  // user -> issued token.
  std::map<std::string, IssuedToken> Build() {
    auto store = SqliteStore::Open(db_);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    std::map<std::string, IssuedToken> issued;
    if (!store.ok()) return issued;
    for (const auto& [user, role] : tokens_) {
      auto t = (*store)->CreateToken(user, role, SystemClock::Default()->NowUnixMillis());
      EXPECT_TRUE(t.ok()) << t.status().ToString();
      if (t.ok()) issued[user] = *t;
    }
    return issued;
  }

 private:
  std::string db_;
  std::vector<std::pair<std::string, api::Role>> tokens_;
};

struct Fixture {
  std::string db;
  std::map<std::string, IssuedToken> tokens;  // bob, carol
};

struct CommandCase {
  std::string name;
  // "$DB" is the store, "$BOB_ID" bob's token id.
  std::vector<std::string> args;
  int code;
  std::vector<std::string> out_has;
  std::vector<std::string> err_has;
  // Further checks of the output and the store afterwards.
  std::function<void(const Outcome&, const Fixture&)> check;
};

class TokenAdminCommandTest : public ::testing::TestWithParam<CommandCase> {};

TEST_P(TokenAdminCommandTest, PrintsAndExitsAsDocumented) {
  TempDir dir;
  Fixture fx;
  fx.db = dir.File("tessera.db");
  fx.tokens = TokenStoreBuilder(fx.db)
                  .WithToken("bob", api::Role::kAdmin)
                  .WithToken("carol", api::Role::kUser)
                  .Build();
  ASSERT_EQ(fx.tokens.size(), 2u);
  std::vector<std::string> args;
  for (std::string a : GetParam().args) {
    if (a == "$DB") a = fx.db;
    if (a == "$BOB_ID") a = fx.tokens["bob"].info.id;
    if (a.find("$DIR") != std::string::npos) a = Expand(a, dir.path());
    args.push_back(a);
  }
  const Outcome o = RunAdmin(args);
  EXPECT_EQ(o.code, GetParam().code) << "out: " << o.out << "\nerr: " << o.err;
  for (const auto& s : GetParam().out_has) EXPECT_NE(o.out.find(s), std::string::npos) << o.out;
  for (const auto& s : GetParam().err_has) EXPECT_NE(o.err.find(s), std::string::npos) << o.err;
  // No command ever prints an existing token's secret.
  for (const auto& [user, t] : fx.tokens) {
    EXPECT_EQ(o.out.find(t.plaintext), std::string::npos) << user;
  }
  if (GetParam().check) GetParam().check(o, fx);
}

void ExpectOneTokenLine(const Outcome& o, const Fixture& fx) {
  ASSERT_EQ(o.err, "");
  ASSERT_FALSE(o.out.empty());
  EXPECT_EQ(o.out.find('\n'), o.out.size() - 1) << o.out;
  auto info = Authenticate(fx.db, o.out.substr(0, o.out.size() - 1));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->user, "dave");
  EXPECT_EQ(info->role, api::Role::kUser);
}

void ExpectCreatedJson(const Outcome& o, const Fixture& fx) {
  auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j.at("user"), "dave");
  EXPECT_EQ(j.at("role"), "admin");
  auto info = Authenticate(fx.db, j.at("token").get<std::string>());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->id, j.at("id").get<std::string>());
  EXPECT_EQ(info->role, api::Role::kAdmin);
}

void ExpectListedTable(const Outcome& o, const Fixture& fx) {
  std::istringstream lines(o.out);
  std::string header, bob, carol, extra;
  std::getline(lines, header);
  std::getline(lines, bob);
  std::getline(lines, carol);
  EXPECT_FALSE(std::getline(lines, extra)) << extra;
  EXPECT_EQ(header, "ID                USER          ROLE   CREATED     REVOKED");
  EXPECT_EQ(bob.rfind(fx.tokens.at("bob").info.id, 0), 0u) << bob;
  EXPECT_NE(bob.find(" admin "), std::string::npos) << bob;
  EXPECT_EQ(bob.back(), '-') << "not revoked: " << bob;
  EXPECT_EQ(carol.rfind(fx.tokens.at("carol").info.id, 0), 0u) << carol;
  EXPECT_NE(carol.find(" user "), std::string::npos) << carol;
}

void ExpectListedJson(const Outcome& o, const Fixture& fx) {
  auto rows = nlohmann::json::parse(o.out);
  ASSERT_EQ(rows.size(), 2u) << o.out;
  EXPECT_EQ(rows[0].at("id"), fx.tokens.at("bob").info.id);
  EXPECT_EQ(rows[0].at("user"), "bob");
  EXPECT_EQ(rows[0].at("role"), "admin");
  EXPECT_TRUE(rows[0].at("created_ms").is_number_integer());
  EXPECT_TRUE(rows[0].at("revoked_ms").is_null());
  EXPECT_EQ(rows[1].at("user"), "carol");
  EXPECT_EQ(rows[1].at("role"), "user");
  EXPECT_EQ(rows[0].size(), 5u) << "no secret fields";
}

void ExpectBobRevoked(const Outcome& o, const Fixture& fx) {
  EXPECT_EQ(o.out, "revoked " + fx.tokens.at("bob").info.id + "\n");
  EXPECT_EQ(Authenticate(fx.db, fx.tokens.at("bob").plaintext).status().code(),
            StatusCode::kUnauthenticated);
  EXPECT_TRUE(Authenticate(fx.db, fx.tokens.at("carol").plaintext).ok());
  const Outcome listed = RunAdmin({"--db", fx.db, "list", "--json"});
  auto rows = nlohmann::json::parse(listed.out);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[0].at("revoked_ms").is_number_integer()) << listed.out;
}

void ExpectStoreUnchanged(const Outcome&, const Fixture& fx) {
  for (const auto& [user, t] : fx.tokens) {
    EXPECT_TRUE(Authenticate(fx.db, t.plaintext).ok()) << user;
  }
  const Outcome listed = RunAdmin({"--db", fx.db, "list", "--json"});
  EXPECT_EQ(nlohmann::json::parse(listed.out).size(), 2u) << listed.out;
}

INSTANTIATE_TEST_SUITE_P(
    Table, TokenAdminCommandTest,
    ::testing::Values(
        CommandCase{"Create",
                    {"--db", "$DB", "create", "dave"},
                    kTokenAdminOk,
                    {"tsr_"},
                    {},
                    ExpectOneTokenLine},
        CommandCase{"CreateAdminJson",
                    {"--db", "$DB", "create", "dave", "--admin", "--json"},
                    kTokenAdminOk,
                    {"\"token\":\"tsr_"},
                    {},
                    ExpectCreatedJson},
        CommandCase{"List",
                    {"--db", "$DB", "list"},
                    kTokenAdminOk,
                    {"bob", "carol"},
                    {},
                    ExpectListedTable},
        CommandCase{
            "ListJson", {"list", "--json", "--db", "$DB"}, kTokenAdminOk, {}, {}, ExpectListedJson},
        CommandCase{"Revoke",
                    {"--db", "$DB", "revoke", "$BOB_ID"},
                    kTokenAdminOk,
                    {},
                    {},
                    ExpectBobRevoked},
        CommandCase{"RevokeUnknownId",
                    {"--db", "$DB", "revoke", "0000000000000000"},
                    kTokenAdminRefused,
                    {},
                    {"error: "},
                    ExpectStoreUnchanged},
        CommandCase{"RevokeBadId",
                    {"--db", "$DB", "revoke", "not an id"},
                    kTokenAdminRefused,
                    {},
                    {"error: "},
                    ExpectStoreUnchanged},
        CommandCase{"NoAction", {"--db", "$DB"}, kTokenAdminUsage, {}, {}, ExpectStoreUnchanged},
        CommandCase{"CreateWithoutUser",
                    {"--db", "$DB", "create"},
                    kTokenAdminUsage,
                    {},
                    {"user"},
                    ExpectStoreUnchanged},
        CommandCase{"UnknownAction",
                    {"--db", "$DB", "rotate"},
                    kTokenAdminUsage,
                    {},
                    {},
                    ExpectStoreUnchanged},
        CommandCase{"RevokeWithoutId",
                    {"--db", "$DB", "revoke"},
                    kTokenAdminUsage,
                    {},
                    {"id"},
                    ExpectStoreUnchanged},
        CommandCase{"DbAndStateDirTogether",
                    {"--db", "$DB", "--state-dir", "$DIR", "list"},
                    kTokenAdminUsage,
                    {},
                    {"excludes"},
                    ExpectStoreUnchanged},
        CommandCase{"Help",
                    {"--help"},
                    kTokenAdminOk,
                    {"create", "list", "revoke", "--db"},
                    {},
                    ExpectStoreUnchanged}),
    [](const ::testing::TestParamInfo<CommandCase>& info) { return info.param.name; });

// ---- a store that cannot be opened ----

struct BadStoreCase {
  std::string name;
  std::function<std::string(const TempDir&)> make_path;  // returns the --db path
};

class TokenAdminBadStoreTest : public ::testing::TestWithParam<BadStoreCase> {};

TEST_P(TokenAdminBadStoreTest, NamesTheStoreAndExits3) {
  TempDir dir;
  const std::string db = GetParam().make_path(dir);
  for (const std::vector<std::string>& action : std::vector<std::vector<std::string>>{
           {"create", "alice"}, {"list"}, {"revoke", "0000000000000000"}}) {
    std::vector<std::string> args = {"--db", db};
    args.insert(args.end(), action.begin(), action.end());
    const Outcome o = RunAdmin(args);
    EXPECT_EQ(o.code, kTokenAdminNoStore) << action[0] << ": " << o.err;
    EXPECT_EQ(o.out, "") << action[0];
    EXPECT_EQ(o.err.rfind("error: cannot open the store " + db + ": ", 0), 0u)
        << action[0] << ": " << o.err;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, TokenAdminBadStoreTest,
    ::testing::Values(BadStoreCase{"NotADatabase",
                                   [](const TempDir& d) {
                                     std::ofstream(d.File("tessera.db"))
                                         << "this is not an SQLite database, but long enough to "
                                            "have a header of one: 0123456789abcdef0123456789\n";
                                     return d.File("tessera.db");
                                   }},
                      BadStoreCase{"MissingFolder",
                                   [](const TempDir& d) { return d.File("nowhere/tessera.db"); }},
                      BadStoreCase{"AFolder",
                                   [](const TempDir& d) {
                                     fs::create_directories(d.path() / "tessera.db");
                                     return d.File("tessera.db");
                                   }}),
    [](const ::testing::TestParamInfo<BadStoreCase>& info) { return info.param.name; });

}  // namespace
}  // namespace tessera::daemon
