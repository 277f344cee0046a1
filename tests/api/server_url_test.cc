// ParseServerUrl: the one parser of a controller address (CLI --server, agent
// --controller, join bundle, TESSERA_CONTROLLER_URL).
#include "api/server_url.h"

#include <gtest/gtest.h>

namespace tessera::api {
namespace {

struct UrlRow {
  const char* url;
  bool ok;
  bool tls;
  const char* host;
  uint16_t port;
  const char* prefix;  // with allow_path
};

const UrlRow kRows[] = {
    {"https://h:1", true, true, "h", 1, ""},
    {"https://ctl/", true, true, "ctl", 443, ""},
    {"https://ctl", true, true, "ctl", 443, ""},
    {"http://127.0.0.1:8080", true, false, "127.0.0.1", 8080, ""},
    {"http://boxA", true, false, "boxA", 80, ""},
    {"http://boxA:9000/", true, false, "boxA", 9000, ""},
    // A bare host: plain HTTP, tesserad's default port when none is given.
    {"boxA", true, false, "boxA", kDefaultServerPort, ""},
    {"boxA:7", true, false, "boxA", 7, ""},
    {"127.0.0.1:8080", true, false, "127.0.0.1", 8080, ""},
    {"[::1]:8080", true, false, "::1", 8080, ""},
    {"https://[::1]:8443", true, true, "::1", 8443, ""},
    {"https://[::1]", true, true, "::1", 443, ""},
    {"https://ctl:8443/tessera/", true, true, "ctl", 8443, "/tessera"},
    // Missing or bad ports.
    {"http://boxA:", false, false, "", 0, ""},
    {"boxA:", false, false, "", 0, ""},
    {"http://boxA:0", false, false, "", 0, ""},
    {"http://boxA:65536", false, false, "", 0, ""},
    {"http://boxA:99999", false, false, "", 0, ""},
    {"http://boxA:x", false, false, "", 0, ""},
    {"https://[::1]:", false, false, "", 0, ""},
    {"https://[::1]x", false, false, "", 0, ""},
    // No host.
    {"https://", false, false, "", 0, ""},
    {"http://:80", false, false, "", 0, ""},
    {":8080", false, false, "", 0, ""},
    {"", false, false, "", 0, ""},
    // User information.
    {"https://us@ctl", false, false, "", 0, ""},
    {"http://user:secret@ctl:8080", false, false, "", 0, ""},
    {"user@ctl:8080", false, false, "", 0, ""},
    // Garbage.
    {"ftp://ctl:80", false, false, "", 0, ""},
    {"http:/ctl", false, false, "", 0, ""},
    {"https://[::1", false, false, "", 0, ""},
    {"http://::1:8080", false, false, "", 0, ""},
    {"a:b:80", false, false, "", 0, ""},
    {"not a url", false, false, "", 0, ""},
    {"http://ctl?x=1", false, false, "", 0, ""},
    {"http://ctl#top", false, false, "", 0, ""},
    {"http://ctl/a b", false, false, "", 0, ""},
};

TEST(ServerUrlTest, TableWithPathPrefix) {
  for (const UrlRow& row : kRows) {
    auto url = ParseServerUrl(row.url, "server", /*allow_path=*/true);
    ASSERT_EQ(url.ok(), row.ok) << '"' << row.url << '"';
    if (!row.ok) {
      EXPECT_EQ(url.status().code(), StatusCode::kInvalidArgument) << row.url;
      EXPECT_EQ(url.status().field(), "server") << row.url;
      continue;
    }
    EXPECT_EQ(url->tls, row.tls) << row.url;
    EXPECT_EQ(url->host, row.host) << row.url;
    EXPECT_EQ(url->port, row.port) << row.url;
    EXPECT_EQ(url->path_prefix, row.prefix) << row.url;
  }
}

TEST(ServerUrlTest, PathOnlyWhenAllowedAndErrorsNameTheCallersField) {
  for (const UrlRow& row : kRows) {
    auto url = ParseServerUrl(row.url, "controller");
    const bool has_prefix = row.ok && row.prefix[0] != '\0';
    ASSERT_EQ(url.ok(), row.ok && !has_prefix) << row.url;
    if (!url.ok()) {
      EXPECT_EQ(url.status().field(), "controller") << row.url;
    }
  }
  EXPECT_FALSE(ParseServerUrl("boxA:80/api", "server").ok());
  EXPECT_TRUE(ParseServerUrl("boxA:80/api", "server", /*allow_path=*/true).ok());
}

TEST(ServerUrlTest, MessagesSayWhatIsWrong) {
  struct Row {
    const char* url;
    const char* message_part;
  };
  const Row rows[] = {
      {"ftp://ctl", "http:// or https://"},
      {"http://us@ctl", "user"},
      {"http://ctl:0", "port"},
      {"http://ctl/api", "path"},
      {"http://::1:80", "brackets"},
      {"http://:80", "no host"},
  };
  for (const Row& row : rows) {
    auto url = ParseServerUrl(row.url, "server");
    ASSERT_FALSE(url.ok()) << row.url;
    EXPECT_NE(url.status().message().find(row.message_part), std::string::npos)
        << row.url << ": " << url.status().message();
  }
}

TEST(ServerUrlTest, LoopbackHosts) {
  for (const char* host : {"127.0.0.1", "127.9.9.9", "::1", "localhost"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (const char* host : {"0.0.0.0", "10.0.0.1", "::", "ctl.lab", "128.0.0.1"}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
}

}  // namespace
}  // namespace tessera::api
