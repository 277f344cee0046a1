// The shapes clients and tesserad share for node identity and TLS: node
// names, enrolment bodies, server URLs, fingerprints and the join bundle.
#include "api/node_identity.h"

#include <gtest/gtest.h>

#include "api/join_bundle.h"
#include "api/server_url.h"
#include "api/tls_context.h"

namespace tessera::api {
namespace {

TEST(NodeIdentityTest, EnrolBodiesNameTheirField) {
  struct Row {
    const char* body;
    const char* node;   // the accepted name, or nullptr
    const char* field;  // the refused field
  };
  const Row rows[] = {
      {R"({"node":"boxa"})", "boxa", ""},
      {R"({"node":"gpu-07.lab_2"})", "gpu-07.lab_2", ""},
      {R"({})", nullptr, "node"},
      {R"({"node":""})", nullptr, "node"},
      {R"({"node":"a b"})", nullptr, "node"},
      {R"({"node":"../x"})", nullptr, "node"},
      {R"({"node":7})", nullptr, "node"},
      {R"({"node":"x","admin":true})", nullptr, "admin"},
      {R"([])", nullptr, "body"},
  };
  for (const Row& row : rows) {
    auto node = EnrolRequestNodeFromJson(Json::parse(row.body));
    if (row.node != nullptr) {
      ASSERT_TRUE(node.ok()) << row.body << node.status().ToString();
      EXPECT_EQ(*node, row.node);
    } else {
      ASSERT_FALSE(node.ok()) << row.body;
      EXPECT_EQ(node.status().field(), row.field) << row.body;
    }
  }
  EXPECT_FALSE(ValidateNodeName(std::string(254, 'a')).ok());
  EXPECT_TRUE(ValidateNodeName(std::string(253, 'a')).ok());
}

TEST(NodeIdentityTest, CredentialShapeAndRoundTrip) {
  const std::string good = "tsn_0123456789abcdef_" + std::string(64, 'a');
  EXPECT_TRUE(LooksLikeNodeCredential(good));
  for (std::string bad : {std::string("tsj_join"), "tsr_0123456789abcdef_" + std::string(64, 'a'),
                          "tsn_0123456789ABCDEF_" + std::string(64, 'a'), good + "0",
                          good.substr(0, good.size() - 1)}) {
    EXPECT_FALSE(LooksLikeNodeCredential(bad)) << bad;
  }
  IssuedNodeCredential issued{{"boxa", "0123456789abcdef", 5, 6, std::nullopt}, good};
  auto back = IssuedNodeCredentialFromJson(ToJson(issued));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->credential, good);
  EXPECT_EQ(back->enrolment, issued.enrolment);
  EXPECT_EQ(ToJson(issued.enrolment)["state"], "active");
}

TEST(FingerprintTest, NormalizesTheFormsPeopleCopy) {
  const std::string hex(64, 'a');
  std::string colons;
  for (int i = 0; i < 32; ++i) colons += std::string(i ? ":" : "") + "AA";
  for (const std::string& in : {hex, colons, "sha256:" + colons, "SHA256:" + hex}) {
    auto n = NormalizeSha256Fingerprint(in, "ca_sha256");
    ASSERT_TRUE(n.ok()) << in;
    EXPECT_EQ(*n, hex);
  }
  for (const std::string& in :
       {std::string(63, 'a'), std::string(65, 'a'), "zz" + hex.substr(2), std::string()}) {
    auto n = NormalizeSha256Fingerprint(in, "ca_sha256");
    ASSERT_FALSE(n.ok()) << in;
    EXPECT_EQ(n.status().field(), "ca_sha256");
  }
  EXPECT_EQ(DisplayFingerprint("ab01"), "AB:01");
}

TEST(JoinBundleTest, FormatsAndParsesBack) {
  JoinBundle b{"https://ctl.lab:8080", std::string(64, 'c'), "tsj_secret"};
  auto back = ParseJoinBundle(FormatJoinBundle(b));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->controller, b.controller);
  EXPECT_EQ(back->ca_sha256, b.ca_sha256);
  EXPECT_EQ(back->join_token, b.join_token);

  struct Row {
    const char* text;
    const char* field;
  };
  const Row rows[] = {
      {"join-token = \"t\"\n", "controller"},
      {"controller = \"https://c\"\n", "join-token"},
      {"controller = \"gopher://c\"\njoin-token = t\n", "controller"},
      {"controller = https://c\nca-sha256 = \"AB\"\njoin-token = t\n", "ca-sha256"},
      {"controller = https://c\nadmin = yes\njoin-token = t\n", "admin"},
      {"controller https://c\n", "join_bundle"},
  };
  for (const Row& row : rows) {
    auto parsed = ParseJoinBundle(row.text);
    ASSERT_FALSE(parsed.ok()) << row.text;
    EXPECT_EQ(parsed.status().field(), row.field) << row.text;
  }
}

}  // namespace
}  // namespace tessera::api
