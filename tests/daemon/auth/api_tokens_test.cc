// The API token and join token checks, above the store: one table of
// presented tokens over the SQLite and the memory backend.
#include "daemon/auth/api_tokens.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "daemon/store/faulty_store.h"
#include "daemon/store/memory_store.h"
#include "daemon/store/sqlite_store.h"
#include "tests/daemon/auth/backend_test_base.h"
#include "tests/daemon/temp_dir.h"

namespace tessera::daemon::auth {
namespace {

// `plaintext` with its last character changed.
std::string Tampered(std::string plaintext) {
  plaintext.back() = plaintext.back() == '0' ? '1' : '0';
  return plaintext;
}

class ApiTokensTest : public BackendTestBase {
 protected:
  IssuedToken Issue(const std::string& user, api::Role role) {
    auto issued = store_->CreateToken(user, role, 42);
    EXPECT_TRUE(issued.ok()) << issued.status().ToString();
    return issued.ok() ? *issued : IssuedToken{};
  }
};

TEST_P(ApiTokensTest, OnlyALiveTokenWithItsOwnSecretAuthenticates) {
  const IssuedToken alice = Issue("alice", api::Role::kAdmin);
  const IssuedToken bob = Issue("bob", api::Role::kUser);
  const IssuedToken bob_old = Issue("bob", api::Role::kUser);
  ASSERT_TRUE(store_->RevokeToken(bob_old.info.id, 50).ok());

  struct Row {
    const char* what;
    std::string presented;
    StatusCode want;
    std::string user;     // when OK
    std::string message;  // a part of the refusal
  };
  const Row rows[] = {
      {"the right one", alice.plaintext, StatusCode::kOk, "alice", ""},
      {"another user's", bob.plaintext, StatusCode::kOk, "bob", ""},
      {"wrong secret", Tampered(alice.plaintext), StatusCode::kUnauthenticated, "",
       "unknown token"},
      {"id of one, secret of another", alice.plaintext.substr(0, 21) + bob.plaintext.substr(21),
       StatusCode::kUnauthenticated, "", "unknown token"},
      {"unknown id", "tsr_0000000000000000_" + std::string(64, 'a'), StatusCode::kUnauthenticated,
       "", "unknown token"},
      {"revoked", bob_old.plaintext, StatusCode::kUnauthenticated, "", "revoked"},
      {"malformed", "hunter2", StatusCode::kUnauthenticated, "", "malformed"},
      {"empty", "", StatusCode::kUnauthenticated, "", "malformed"},
      {"a node credential's shape", "tsn_" + alice.plaintext.substr(4),
       StatusCode::kUnauthenticated, "", "malformed"},
  };
  for (const Row& row : rows) {
    auto got = AuthenticateApiToken(store_.get(), row.presented);
    ASSERT_EQ(got.status().code(), row.want) << row.what << ": " << got.status().ToString();
    if (got.ok()) {
      EXPECT_EQ(got->user, row.user) << row.what;
    } else {
      EXPECT_NE(got.status().message().find(row.message), std::string::npos)
          << row.what << ": " << got.status().ToString();
    }
  }
  auto info = AuthenticateApiToken(store_.get(), alice.plaintext);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(*info, alice.info) << "the token's info, role included";
}

TEST_P(ApiTokensTest, StoreFailuresAreNotTakenForBadTokens) {
  const IssuedToken alice = Issue("alice", api::Role::kUser);
  FaultyStore faulty(store_.get());
  faulty.ArmReadFault(1, Unavailable("reader lost"));
  EXPECT_EQ(AuthenticateApiToken(&faulty, alice.plaintext).status().code(),
            StatusCode::kUnavailable);
  faulty.ArmReadFault(1, Unavailable("reader lost"));
  EXPECT_EQ(CheckAgentJoinToken(&faulty, "join").code(), StatusCode::kUnavailable);
  EXPECT_TRUE(AuthenticateApiToken(&faulty, alice.plaintext).ok());
}

TEST_P(ApiTokensTest, JoinToken) {
  struct Row {
    const char* what;
    std::string set;  // set before the check, unless empty
    std::string presented;
    StatusCode want;
  };
  const Row rows[] = {
      {"none set", "", "anything", StatusCode::kUnauthenticated},
      {"the right one", "join-me-please", "join-me-please", StatusCode::kOk},
      {"one letter off", "", "join-me-pleasE", StatusCode::kUnauthenticated},
      {"empty", "", "", StatusCode::kUnauthenticated},
      {"the old one after rotation", "rotated", "join-me-please", StatusCode::kUnauthenticated},
      {"the new one after rotation", "", "rotated", StatusCode::kOk},
  };
  for (const Row& row : rows) {
    if (!row.set.empty()) {
      ASSERT_TRUE(store_->SetAgentJoinToken(row.set).ok()) << row.what;
    }
    EXPECT_EQ(CheckAgentJoinToken(store_.get(), row.presented).code(), row.want) << row.what;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ApiTokensTest, EveryBackend(), BackendName);

TEST(HoldsAdminTokenTest, OnlyALiveAdminTokenOfTheUser) {
  const std::vector<TokenInfo> tokens = {
      {"01", "root", api::Role::kAdmin, 1, std::nullopt},
      {"02", "ex-admin", api::Role::kAdmin, 1, 5},
      {"03", "alice", api::Role::kUser, 1, std::nullopt},
      {"04", "both", api::Role::kAdmin, 1, 5},
      {"05", "both", api::Role::kAdmin, 2, std::nullopt},
  };
  struct Row {
    const char* user;
    bool want;
  };
  const Row rows[] = {
      {"root", true}, {"ex-admin", false}, {"alice", false}, {"both", true}, {"nobody", false}};
  for (const Row& row : rows) EXPECT_EQ(HoldsAdminToken(tokens, row.user), row.want) << row.user;
}

}  // namespace
}  // namespace tessera::daemon::auth
