// tesserad's TLS setup: its own CA and server certificate (self_signed_ca.h)
// and the configuration keys that choose HTTPS (daemon_config.h).
#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "api/tls_context.h"
#include "common/faulty_file_system.h"
#include "daemon/daemon_config.h"
#include "daemon/self_signed_ca.h"
#include "tests/daemon/temp_dir.h"

namespace tessera::daemon {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

unsigned Mode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

// The server certificate verifies against the CA as a TLS server for `name`.
bool VerifiesFor(const SelfSignedTls& tls, const std::string& name, bool ip) {
  BIO* ca_bio = BIO_new_file(tls.ca_file.c_str(), "r");
  BIO* leaf_bio = BIO_new_file(tls.server.cert_file.c_str(), "r");
  X509* ca = PEM_read_bio_X509(ca_bio, nullptr, nullptr, nullptr);
  X509* leaf = PEM_read_bio_X509(leaf_bio, nullptr, nullptr, nullptr);
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf, nullptr);
  X509_STORE_CTX_set_default(ctx, "ssl_server");
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx);
  if (ip) {
    X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str());
  } else {
    X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
  }
  const bool ok = X509_verify_cert(ctx) == 1;
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  X509_free(leaf);
  X509_free(ca);
  BIO_free(leaf_bio);
  BIO_free(ca_bio);
  return ok;
}

TEST(SelfSignedTlsTest, MakesTheCaOnceAndReissuesTheServerCertificateForNewNames) {
  testing::TempDir dir;
  const std::string tls_dir = dir.File("tls");
  auto first = EnsureSelfSignedTls(tls_dir, {"ctl.lab", "127.0.0.1"});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->made_ca);
  EXPECT_TRUE(first->issued_server_certificate);
  EXPECT_EQ(Mode(tls_dir + "/ca.key"), 0600u);
  EXPECT_EQ(Mode(tls_dir + "/server.key"), 0600u);
  EXPECT_EQ(Mode(tls_dir), 0700u);
  EXPECT_TRUE(api::CheckTlsServerFiles(first->server).ok());
  EXPECT_EQ(*api::CertificateFileSha256(first->ca_file), first->ca_sha256);

  struct Row {
    std::string name;
    bool ip;
    bool verifies;
  };
  const Row rows[] = {{"ctl.lab", false, true},
                      {"127.0.0.1", true, true},
                      {"other.lab", false, false},
                      {"10.0.0.1", true, false}};
  for (const Row& row : rows)
    EXPECT_EQ(VerifiesFor(*first, row.name, row.ip), row.verifies) << row.name;

  // A restart with the same names changes nothing.
  const std::string server_pem = Slurp(first->server.cert_file);
  auto again = EnsureSelfSignedTls(tls_dir, {"ctl.lab", "127.0.0.1"});
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->made_ca);
  EXPECT_FALSE(again->issued_server_certificate);
  EXPECT_EQ(Slurp(again->server.cert_file), server_pem);

  // A new name: a new server certificate from the same CA, so pins stay valid.
  auto renamed = EnsureSelfSignedTls(tls_dir, {"ctl.lab", "127.0.0.1", "10.0.0.1"});
  ASSERT_TRUE(renamed.ok());
  EXPECT_FALSE(renamed->made_ca);
  EXPECT_TRUE(renamed->issued_server_certificate);
  EXPECT_EQ(renamed->ca_sha256, first->ca_sha256);
  EXPECT_TRUE(VerifiesFor(*renamed, "10.0.0.1", true));

  // A lost key: the server certificate is issued again, still by the same CA.
  ASSERT_EQ(std::remove((tls_dir + "/server.key").c_str()), 0);
  auto recovered = EnsureSelfSignedTls(tls_dir, {"ctl.lab"});
  ASSERT_TRUE(recovered.ok());
  EXPECT_TRUE(recovered->issued_server_certificate);
  EXPECT_EQ(recovered->ca_sha256, first->ca_sha256);
  EXPECT_TRUE(api::CheckTlsServerFiles(recovered->server).ok());
}

// A TLS file whose fsync or rename fails is tesserad's setup error
// (kUnavailable naming the file), and the file is left as it was.
TEST(SelfSignedTlsTest, FilesThatCannotBeWrittenFailTheSetup) {
  struct Case {
    FileOp op;
    const char* file;
    int err;
  };
  const Case cases[] = {{FileOp::kSync, "ca.key", EIO},
                        {FileOp::kRename, "ca.pem", ENOSPC},
                        {FileOp::kSync, "server.key", EIO},
                        {FileOp::kRename, "server.pem", EROFS}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    testing::TempDir dir;
    const std::string tls_dir = dir.File("tls");
    FaultyFileSystem faulty;
    faulty.FailNext(c.op, c.file, c.err);
    auto failed = EnsureSelfSignedTls(tls_dir, {"ctl.lab"}, &faulty);
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable);
    const std::string file = tls_dir + "/" + c.file;
    EXPECT_EQ(failed.status().message().rfind("cannot write " + file + ": ", 0), 0u)
        << failed.status().message();
    EXPECT_NE(failed.status().message().find(std::strerror(c.err)), std::string::npos);
    EXPECT_FALSE(std::filesystem::exists(file));
    auto retried = EnsureSelfSignedTls(tls_dir, {"ctl.lab"});  // the disk is back
    ASSERT_TRUE(retried.ok()) << retried.status().ToString();
    EXPECT_TRUE(api::CheckTlsServerFiles(retried->server).ok());
    EXPECT_EQ(Mode(tls_dir + "/ca.key"), 0600u);
  }
}

TEST(SelfSignedTlsTest, DefaultNamesHoldLoopbackAndTheListenAddress) {
  auto names = DefaultServerNames("192.0.2.7", {"ctl.lab", "localhost"});
  for (const char* want : {"localhost", "127.0.0.1", "::1", "192.0.2.7", "ctl.lab"}) {
    EXPECT_EQ(std::count(names.begin(), names.end(), want), 1) << want;
  }
  auto wildcard = DefaultServerNames("0.0.0.0", {});
  EXPECT_EQ(std::count(wildcard.begin(), wildcard.end(), "0.0.0.0"), 0);
}

TEST(DaemonConfigTlsTest, TlsKeysAreCheckedAndNameTheirField) {
  testing::TempDir dir;
  struct Row {
    const char* yaml;
    bool ok;
    bool serves_tls;
    const char* field;
  };
  const Row rows[] = {
      {"listen_address: 127.0.0.1\n", true, false, ""},
      {"listen_address: 0.0.0.0\n", true, true, ""},
      {"listen_address: 127.0.0.1\ntls: on\n", true, true, ""},
      {"listen_address: 0.0.0.0\ntls: off\n", false, false, "allow_insecure_http"},
      {"listen_address: 0.0.0.0\ntls: off\nallow_insecure_http: true\n", true, false, ""},
      {"tls: maybe\n", false, false, "tls"},
      {"tls_cert_file: /x.pem\n", false, false, "tls_key_file"},
      {"tls_key_file: /x.key\n", false, false, "tls_cert_file"},
      {"tls_cert_file: /x.pem\ntls_key_file: /x.key\n", true, true, ""},
      {"tls: off\ntls_cert_file: /x.pem\ntls_key_file: /x.key\n", false, false, "tls"},
      {"tls_server_names: [ctl.lab, 192.0.2.1]\n", true, false, ""},
      {"tls_server_names: ctl.lab\n", false, false, "tls_server_names"},
      {"tls_server_names: [\"a b\"]\n", false, false, "tls_server_names"},
      {"allow_insecure_http: perhaps\n", false, false, "allow_insecure_http"},
  };
  for (const Row& row : rows) {
    const std::string path = dir.File("tesserad.yaml");
    std::ofstream(path) << "state_dir: " << dir.path() << "\n" << row.yaml;
    DaemonConfig config;
    Status st = LoadDaemonConfig(path, &config);
    if (st.ok()) st = config.Validate();
    EXPECT_EQ(st.ok(), row.ok) << row.yaml << st.ToString();
    if (!st.ok()) {
      EXPECT_EQ(st.field(), row.field) << row.yaml << st.ToString();
    } else {
      EXPECT_EQ(config.ServesTls(), row.serves_tls) << row.yaml;
    }
  }
}

TEST(DaemonConfigTlsTest, TheSampleConfigLoads) {
  DaemonConfig config;
  ASSERT_TRUE(
      LoadDaemonConfig(std::string(TESSERA_SOURCE_DIR) + "/systemd/tesserad.yaml", &config).ok());
  EXPECT_TRUE(config.Validate().ok()) << config.Validate().ToString();
  EXPECT_TRUE(config.ServesTls()) << "it listens on 0.0.0.0: HTTPS";
}

}  // namespace
}  // namespace tessera::daemon
