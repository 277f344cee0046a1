// Keeps api/openapi.yaml in step with the router's route table: every route
// the router serves must be documented with its method.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "api/router.h"

#ifndef TESSERA_SOURCE_DIR
#error "TESSERA_SOURCE_DIR must be defined"
#endif

namespace tessera::api {
namespace {

YAML::Node LoadSpec() {
  return YAML::LoadFile(std::string(TESSERA_SOURCE_DIR) + "/api/openapi.yaml");
}

TEST(OpenApiTest, IsOpenApi3) {
  YAML::Node doc = LoadSpec();
  ASSERT_TRUE(doc["openapi"]);
  EXPECT_EQ(doc["openapi"].as<std::string>().substr(0, 2), "3.");
  ASSERT_TRUE(doc["paths"].IsMap());
}

TEST(OpenApiTest, EveryRouteIsDocumented) {
  YAML::Node paths = LoadSpec()["paths"];
  for (const RouteInfo& route : RouteTable()) {
    std::string method(route.method);
    std::transform(method.begin(), method.end(), method.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    std::string pattern(route.pattern);
    ASSERT_TRUE(paths[pattern]) << pattern << " is missing from api/openapi.yaml";
    EXPECT_TRUE(paths[pattern][method])
        << route.method << " " << pattern << " is missing from api/openapi.yaml";
  }
}

TEST(OpenApiTest, EveryDocumentedOperationIsRouted) {
  YAML::Node paths = LoadSpec()["paths"];
  for (const auto& path : paths) {
    std::string pattern = path.first.as<std::string>();
    for (const auto& op : path.second) {
      std::string method = op.first.as<std::string>();
      if (method == "parameters" || method == "summary" || method == "description") continue;
      std::transform(method.begin(), method.end(), method.begin(),
                     [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
      bool found = std::any_of(RouteTable().begin(), RouteTable().end(), [&](const RouteInfo& r) {
        return r.method == method && r.pattern == pattern;
      });
      // "/" (static web UI) is served by the fallback, not the table.
      if (pattern == "/{path}") continue;
      EXPECT_TRUE(found) << method << " " << pattern << " is documented but not routed";
    }
  }
}

}  // namespace
}  // namespace tessera::api
