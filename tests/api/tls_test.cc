// HTTPS between api::HttpServer and api::HttpClient on a loopback port, with
// a CA and certificate made by daemon/self_signed_ca.h: what each way of
// verifying accepts, and that a refused or plain-HTTP peer reaches no
// handler.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>

#include "api/http_client.h"
#include "api/http_server.h"
#include "daemon/self_signed_ca.h"
#include "tests/daemon/temp_dir.h"

namespace tessera::api {
namespace {

using namespace std::chrono_literals;

class TlsTest : public ::testing::Test {
 protected:
  // A TLS server whose certificate names only `names`.
  void StartServer(const std::vector<std::string>& names) {
    auto made = daemon::EnsureSelfSignedTls(dir_.File("tls"), names);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    tls_ = *made;
    HttpServerOptions options;
    options.tls = tls_.server;
    options.idle_timeout = 2s;
    server_ = std::make_unique<HttpServer>(options, [this](const Request& r) {
      ++handled_;
      Response out;
      out.body = R"({"ok":true,"target":")" + r.target + "\"}";
      return out;
    });
    Status st = server_->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  Result<HttpResponse> Get(const std::string& host, TlsClientOptions tls, bool https = true) {
    HttpClient client(ServerUrl{https, host, server_->port(), ""}, 5s, std::move(tls));
    return client.Request("GET", "/healthz");
  }

  daemon::testing::TempDir dir_;
  daemon::SelfSignedTls tls_;
  std::atomic<int> handled_{0};
  std::unique_ptr<HttpServer> server_;
};

TEST_F(TlsTest, EachWayOfVerifyingAcceptsTheRightServerOnly) {
  StartServer({"ctl.lab", "127.0.0.1"});
  std::string wrong_pin = tls_.ca_sha256;
  wrong_pin[10] = wrong_pin[10] == 'f' ? 'e' : 'f';
  struct Row {
    const char* name;
    TlsClientOptions tls;
    bool https;
    bool answered;
  };
  const Row rows[] = {
      {"pinned CA fingerprint", {"", tls_.ca_sha256}, true, true},
      {"pinned server certificate",
       {"", *CertificateFileSha256(tls_.server.cert_file)},
       true,
       true},
      {"CA file, the IP is in the certificate", {tls_.ca_file, ""}, true, true},
      {"wrong pin", {"", wrong_pin}, true, false},
      {"system trust store", {"", ""}, true, false},
      {"another CA's file", {dir_.File("other/ca.pem"), ""}, true, false},
      {"plain HTTP to the TLS port", {"", ""}, false, false},
  };
  ASSERT_TRUE(daemon::EnsureSelfSignedTls(dir_.File("other"), {"127.0.0.1"}).ok());
  for (const Row& row : rows) {
    const int before = handled_.load();
    auto r = Get("127.0.0.1", row.tls, row.https);
    if (row.answered) {
      ASSERT_TRUE(r.ok()) << row.name << ": " << r.status().ToString();
      EXPECT_EQ(r->status, 200) << row.name;
      EXPECT_EQ(handled_.load(), before + 1) << row.name;
    } else {
      EXPECT_FALSE(r.ok()) << row.name << ": answered " << (r.ok() ? r->body : "");
      EXPECT_EQ(handled_.load(), before) << row.name << ": the request reached the handler";
    }
  }
}

TEST_F(TlsTest, CaFileChecksTheHostNameButThePinDoesNot) {
  StartServer({"ctl.lab"});  // 127.0.0.1 is not in the certificate
  auto by_ca = Get("127.0.0.1", {tls_.ca_file, ""});
  ASSERT_FALSE(by_ca.ok());
  EXPECT_NE(by_ca.status().message().find("certificate"), std::string::npos)
      << by_ca.status().ToString();
  auto by_pin = Get("127.0.0.1", {"", tls_.ca_sha256});
  ASSERT_TRUE(by_pin.ok()) << by_pin.status().ToString();
  EXPECT_EQ(by_pin->status, 200);
}

TEST_F(TlsTest, KeepAliveConnectionCarriesManyRequests) {
  StartServer({"127.0.0.1"});
  HttpClient client(ServerUrl{true, "127.0.0.1", server_->port(), ""}, 5s,
                    TlsClientOptions{"", tls_.ca_sha256});
  for (int i = 0; i < 5; ++i) {
    auto r = client.Request("GET", "/x" + std::to_string(i));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_NE(r->body.find("/x" + std::to_string(i)), std::string::npos);
  }
  EXPECT_EQ(server_->open_connections(), 1u);
}

TEST_F(TlsTest, BadTlsSettingsNameTheirField) {
  std::ofstream(dir_.File("junk.pem")) << "not a certificate\n";
  HttpServerOptions options;
  options.tls = TlsServerFiles{dir_.File("junk.pem"), dir_.File("junk.pem")};
  HttpServer server(options, [](const Request&) { return Response{}; });
  Status st = server.Start();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.field(), "tls_cert_file");

  HttpClient bad_pin(ServerUrl{true, "127.0.0.1", 1, ""}, 1s, TlsClientOptions{"", "abc"});
  auto r = bad_pin.Request("GET", "/");
  EXPECT_EQ(r.status().field(), "ca_sha256");
  HttpClient bad_ca(ServerUrl{true, "127.0.0.1", 1, ""}, 1s,
                    TlsClientOptions{dir_.File("missing.pem"), ""});
  EXPECT_EQ(bad_ca.Request("GET", "/").status().field(), "ca_file");
}

}  // namespace
}  // namespace tessera::api
