// Node credentials above the store: enrolment rules and the credential
// check, over the SQLite and the memory backend.
#include "daemon/auth/node_credentials.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "daemon/store/faulty_store.h"
#include "daemon/store/memory_store.h"
#include "daemon/store/sqlite_store.h"
#include "tests/daemon/auth/backend_test_base.h"
#include "tests/daemon/temp_dir.h"

namespace tessera::daemon::auth {
namespace {

class NodeCredentialsTest : public BackendTestBase {
 protected:
  // Enrols `node` at 1000; remembers its newest credential.
  StatusCode Enrol(const std::string& node) {
    auto issued = EnrolNode(store_.get(), node, 1000);
    if (!issued.ok()) return issued.status().code();
    EXPECT_TRUE(api::LooksLikeNodeCredential(issued->credential)) << issued->credential;
    EXPECT_EQ(issued->enrolment.node, node);
    cred_[node] = issued->credential;
    return StatusCode::kOk;
  }
  // The node a credential authenticates at `now_ms`, or the refusal's code name.
  std::string Check(const std::string& credential, int64_t now_ms = 2000) {
    auto node = AuthenticateNode(store_.get(), credential, now_ms);
    return node.ok() ? *node : std::string(StatusCodeName(node.status().code()));
  }

  std::map<std::string, std::string> cred_;  // node -> newest credential issued
};

// Enrol, authenticate, re-enrol, revoke, readmit, in the order an operator
// meets them.
TEST_P(NodeCredentialsTest, LifeCycle) {
  ASSERT_EQ(Enrol("boxa"), StatusCode::kOk);
  const std::string unused_boxa = cred_["boxa"];
  // Unused yet (the agent may have lost the answer): enrolling again replaces it.
  ASSERT_EQ(Enrol("boxa"), StatusCode::kOk);
  EXPECT_NE(cred_["boxa"], unused_boxa);
  EXPECT_EQ(Check(unused_boxa), "unauthenticated") << "the replaced credential is gone";
  EXPECT_EQ(Check(cred_["boxa"]), "boxa");
  // Now in use: the join token cannot take the name again.
  EXPECT_EQ(Enrol("boxa"), StatusCode::kAlreadyExists);
  EXPECT_EQ(Check(cred_["boxa"]), "boxa") << "a refused enrolment changes nothing";
  ASSERT_EQ(Enrol("boxb"), StatusCode::kOk);
  EXPECT_EQ(Check(cred_["boxb"]), "boxb");

  ASSERT_TRUE(store_->RevokeNode("boxa", 3000).ok());
  EXPECT_EQ(Check(cred_["boxa"]), "unauthenticated");
  EXPECT_EQ(Check(cred_["boxb"]), "boxb") << "other nodes are unaffected";
  EXPECT_EQ(Enrol("boxa"), StatusCode::kPermissionDenied) << "a revoked name stays out";

  EXPECT_EQ(ReadmitNode(store_.get(), "boxb").code(), StatusCode::kFailedPrecondition)
      << "only a revoked node is readmitted";
  EXPECT_EQ(ReadmitNode(store_.get(), "nobody").code(), StatusCode::kNotFound);
  ASSERT_TRUE(ReadmitNode(store_.get(), "boxa").ok());
  EXPECT_EQ(store_->GetNodeCredential("boxa").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Check(cred_["boxa"]), "unauthenticated") << "readmission issues nothing";
  ASSERT_EQ(Enrol("boxa"), StatusCode::kOk);
  EXPECT_EQ(Check(cred_["boxa"]), "boxa");
}

TEST_P(NodeCredentialsTest, OnlyALiveCredentialWithItsOwnSecretAuthenticates) {
  ASSERT_EQ(Enrol("boxa"), StatusCode::kOk);
  ASSERT_EQ(Enrol("boxb"), StatusCode::kOk);
  ASSERT_EQ(Enrol("boxr"), StatusCode::kOk);
  ASSERT_TRUE(store_->RevokeNode("boxr", 1500).ok());
  std::string tampered = cred_["boxa"];
  tampered.back() = tampered.back() == '0' ? '1' : '0';
  struct Row {
    const char* what;
    std::string presented;
    std::string want;
  };
  const Row rows[] = {
      {"the right one", cred_["boxa"], "boxa"},
      {"wrong secret", tampered, "unauthenticated"},
      {"id of a, secret of b", cred_["boxa"].substr(0, 21) + cred_["boxb"].substr(21),
       "unauthenticated"},
      {"unknown id", "tsn_0000000000000000_" + std::string(64, 'a'), "unauthenticated"},
      {"revoked", cred_["boxr"], "unauthenticated"},
      {"empty", "", "unauthenticated"},
      {"the join token", "tsj_join-token", "unauthenticated"},
      {"an API token's prefix", "tsr_" + cred_["boxa"].substr(4), "unauthenticated"},
  };
  for (const Row& row : rows) EXPECT_EQ(Check(row.presented), row.want) << row.what;
}

TEST_P(NodeCredentialsTest, TheFirstSuccessfulCheckIsRecordedOnce) {
  ASSERT_EQ(Enrol("boxa"), StatusCode::kOk);
  std::string tampered = cred_["boxa"];
  tampered.back() = tampered.back() == '0' ? '1' : '0';
  EXPECT_EQ(Check(tampered, 1500), "unauthenticated");
  EXPECT_FALSE(store_->GetNodeCredential("boxa")->enrolment.first_used_ms)
      << "a refused check records nothing";
  EXPECT_EQ(Check(cred_["boxa"], 2000), "boxa");
  EXPECT_EQ(Check(cred_["boxa"], 3000), "boxa");
  EXPECT_EQ(store_->GetNodeCredential("boxa")->enrolment.first_used_ms, 2000);
}

TEST_P(NodeCredentialsTest, StoreFailuresAreNotTakenForBadCredentials) {
  ASSERT_EQ(Enrol("boxa"), StatusCode::kOk);
  FaultyStore faulty(store_.get());
  faulty.ArmReadFault(1, Unavailable("reader lost"));
  EXPECT_EQ(AuthenticateNode(&faulty, cred_["boxa"], 2000).status().code(),
            StatusCode::kUnavailable);
  faulty.ArmWriteFault(1, Unavailable("disk busy"));
  EXPECT_EQ(AuthenticateNode(&faulty, cred_["boxa"], 2000).status().code(),
            StatusCode::kUnavailable)
      << "the first use could not be recorded";
  EXPECT_FALSE(store_->GetNodeCredential("boxa")->enrolment.first_used_ms);
  faulty.ArmWriteFault(1, Unavailable("disk busy"));
  EXPECT_EQ(EnrolNode(&faulty, "boxb", 1000).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store_->GetNodeCredential("boxb").status().code(), StatusCode::kNotFound);
}

TEST_P(NodeCredentialsTest, BadNodeNamesAreRefused) {
  EXPECT_EQ(EnrolNode(store_.get(), "bad name", 1).status().field(), "node");
  EXPECT_EQ(EnrolNode(store_.get(), "", 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(store_->ListNodeEnrolments()->empty());
}

INSTANTIATE_TEST_SUITE_P(Backends, NodeCredentialsTest, EveryBackend(), BackendName);

// The enrolment rule on its own: what the name's current record allows.
TEST(CheckEnrolmentAllowedTest, Table) {
  auto record = [](std::optional<int64_t> first_used, std::optional<int64_t> revoked) {
    return std::optional<api::NodeEnrolment>(
        api::NodeEnrolment{"boxa", "00000000000000a1", 1, first_used, revoked});
  };
  struct Row {
    const char* what;
    std::optional<api::NodeEnrolment> existing;
    StatusCode want;
  };
  const Row rows[] = {
      {"never enrolled", std::nullopt, StatusCode::kOk},
      {"enrolled, unused", record(std::nullopt, std::nullopt), StatusCode::kOk},
      {"in use", record(5, std::nullopt), StatusCode::kAlreadyExists},
      {"revoked unused", record(std::nullopt, 6), StatusCode::kPermissionDenied},
      {"revoked after use", record(5, 6), StatusCode::kPermissionDenied},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(CheckEnrolmentAllowed(row.existing).code(), row.want) << row.what;
  }
}

}  // namespace
}  // namespace tessera::daemon::auth
