#include "cli/token_commands.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "daemon/auth/api_tokens.h"
#include "daemon/sqlite_store.h"

namespace tessera::cli {
namespace {
namespace fs = std::filesystem;

class TokenCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera-cli-token-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "tessera.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  int Run(std::vector<std::string> args, std::string* out) {
    args.insert(args.begin(), "tessera");
    std::ostringstream o, e;
    int rc = RunCli(args, o, e, {RegisterTokenCommands},
                    [](const std::string&) { return std::optional<std::string>(); });
    *out = o.str() + e.str();
    return rc;
  }

  fs::path dir_;
  std::string db_;
};

TEST_F(TokenCommandsTest, CreateListRevokeOnTheLocalStore) {
  std::string out;
  ASSERT_EQ(Run({"token", "--db", db_, "create", "bob", "--admin"}, &out), 0) << out;
  std::string plaintext = out.substr(0, out.find('\n'));
  ASSERT_EQ(plaintext.rfind("tsr_", 0), 0u) << out;

  ASSERT_EQ(Run({"token", "--db", db_, "list"}, &out), 0) << out;
  EXPECT_NE(out.find("bob"), std::string::npos);
  EXPECT_NE(out.find("admin"), std::string::npos);
  EXPECT_EQ(out.find(plaintext), std::string::npos) << "list must not show secrets";

  std::string id;
  {
    auto store = daemon::SqliteStore::Open(db_);
    ASSERT_TRUE(store.ok());
    auto info = daemon::auth::AuthenticateApiToken(store->get(), plaintext);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(info->user, "bob");
    EXPECT_EQ(info->role, api::Role::kAdmin);
    id = info->id;
  }
  ASSERT_EQ(Run({"token", "--db", db_, "revoke", id}, &out), 0) << out;
  auto store = daemon::SqliteStore::Open(db_);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(daemon::auth::AuthenticateApiToken(store->get(), plaintext).status().code(),
            StatusCode::kUnauthenticated);
  EXPECT_NE(Run({"token", "--db", db_, "revoke", "nope"}, &out), 0);
}

}  // namespace
}  // namespace tessera::cli
