#include "cli/token_pointer.h"

#include <gtest/gtest.h>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_app.h"

namespace tessera::cli {
namespace {

struct PointerCase {
  std::string name;
  std::vector<std::string> args;  // after the program name
};

class TokenPointerTest : public ::testing::TestWithParam<PointerCase> {};

// Whatever follows `token`, the CLI does no token work itself: it points to
// `tesserad token` on the controller's machine and exits with a usage error.
TEST_P(TokenPointerTest, PointsToTesseradAndExits2) {
  std::vector<std::string> argv = {"tessera"};
  argv.insert(argv.end(), GetParam().args.begin(), GetParam().args.end());
  std::ostringstream out, err;
  int code = RunCli(argv, out, err, {}, [](const std::string&) { return std::nullopt; });
  EXPECT_EQ(code, kExitUsage);
  EXPECT_EQ(out.str(), "");
  EXPECT_EQ(err.str(), kTokenPointer);
  EXPECT_NE(err.str().find("tesserad token create USER [--admin] [--db <state_dir>/tessera.db]"),
            std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Args, TokenPointerTest,
    ::testing::Values(PointerCase{"Create", {"token", "create", "bob"}},
                      PointerCase{"Bare", {"token"}},
                      PointerCase{"CreateAdminWithDb",
                                  {"token", "--db", "/tmp/t.db", "create", "bob", "--admin"}},
                      PointerCase{"List", {"token", "list", "--json"}},
                      PointerCase{"Revoke", {"token", "revoke", "0123456789abcdef"}},
                      PointerCase{"Help", {"token", "--help"}},
                      PointerCase{
                          "AfterGlobalOptions",
                          {"--json", "--server", "http://127.0.0.1:1", "token", "create", "bob"}}),
    [](const ::testing::TestParamInfo<PointerCase>& info) { return info.param.name; });

}  // namespace
}  // namespace tessera::cli
