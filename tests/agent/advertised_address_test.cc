// The address an agent advertises for its ranks (MASTER_ADDR): the local address
// facing the controller by default, never loopback towards a remote controller.
#include "agent/advertised_address.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <optional>
#include <string>

namespace tessera::agent {
namespace {

api::ServerUrl Controller(const std::string& host) {
  api::ServerUrl url;
  url.host = host;
  url.port = 8080;
  return url;
}

// A non-loopback IPv4 address of this host, if it has one.
std::optional<std::string> OwnAddress() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return std::nullopt;
  std::optional<std::string> out;
  for (ifaddrs* i = list; i != nullptr && !out; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    const in_addr a = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &a, text, sizeof text);
    if (std::string(text).rfind("127.", 0) != 0) out = text;
  }
  ::freeifaddrs(list);
  return out;
}

TEST(AdvertisedAddressTest, ConfiguredAddressesAreCheckedAgainstTheController) {
  struct Case {
    const char* configured;
    const char* controller;
    StatusCode code;
    const char* want;  // when ok
  };
  for (const Case& c : {
           Case{"10.0.0.5", "10.0.0.1", StatusCode::kOk, "10.0.0.5"},
           Case{"127.0.0.1", "127.0.0.1", StatusCode::kOk, "127.0.0.1"},
           Case{"127.0.0.1", "localhost", StatusCode::kOk, "127.0.0.1"},
           Case{"127.0.0.1", "10.0.0.1", StatusCode::kInvalidArgument, ""},
           Case{"::1", "tesserad.lab.example", StatusCode::kInvalidArgument, ""},
           Case{"localhost", "10.0.0.1", StatusCode::kInvalidArgument, ""},
       }) {
    SCOPED_TRACE(std::string(c.configured) + " -> " + c.controller);
    auto got = AdvertisedAddress(c.configured, Controller(c.controller));
    EXPECT_EQ(got.status().code(), c.code) << got.status().ToString();
    if (got.ok()) {
      EXPECT_EQ(*got, c.want);
    } else {
      EXPECT_EQ(got.status().field(), "address");
      EXPECT_NE(got.status().message().find("loopback"), std::string::npos);
    }
  }
}

TEST(AdvertisedAddressTest, DefaultIsTheLocalAddressFacingTheController) {
  auto local = AdvertisedAddress("", Controller("127.0.0.1"));
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  EXPECT_EQ(*local, "127.0.0.1");
  const std::optional<std::string> own = OwnAddress();
  if (!own) GTEST_SKIP() << "this host has no non-loopback IPv4 address";
  // Towards one of this host's own addresses the kernel picks that address.
  auto facing = AdvertisedAddress("", Controller(*own));
  ASSERT_TRUE(facing.ok()) << facing.status().ToString();
  EXPECT_EQ(*facing, *own);
}

TEST(AdvertisedAddressTest, AnUnresolvableControllerIsUnavailable) {
  auto got = LocalAddressTowards(Controller("no-such-host.invalid"));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tessera::agent
