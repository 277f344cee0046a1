// The YAML scalar readers: each kind's values, and every wrong kind named by
// field with what was there.
#include "common/yaml_scalars.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tessera {
namespace {

YAML::Node ValueOf(const std::string& yaml) { return YAML::Load("v: " + yaml)["v"]; }

TEST(YamlScalarsTest, ReadsEachKind) {
  EXPECT_EQ(YamlString(ValueOf("boxa"), "f").value_or(""), "boxa");
  EXPECT_EQ(YamlString(ValueOf("\"12\""), "f").value_or(""), "12");
  EXPECT_DOUBLE_EQ(YamlNumber(ValueOf("0.175"), "f").value_or(-1), 0.175);
  EXPECT_DOUBLE_EQ(YamlNumber(ValueOf("12"), "f").value_or(-1), 12);
  for (const char* yes : {"true", "yes", "on"}) {
    EXPECT_TRUE(YamlBool(ValueOf(yes), "f").value_or(false)) << yes;
  }
  for (const char* no : {"false", "no", "off"}) {
    EXPECT_FALSE(YamlBool(ValueOf(no), "f").value_or(true)) << no;
  }
  EXPECT_EQ(YamlStringList(ValueOf("[A*, \"B_?\"]"), "f").value_or(std::vector<std::string>{}),
            (std::vector<std::string>{"A*", "B_?"}));
  EXPECT_TRUE(YamlStringList(ValueOf("[]"), "f").value_or(std::vector<std::string>{"x"}).empty());
}

TEST(YamlScalarsTest, WrongKindsNameTheFieldAndWhatWasThere) {
  struct Row {
    const char* name;
    Status status;
    const char* field;
    const char* message;
  };
  const Row rows[] = {
      {"word_for_number", YamlNumber(ValueOf("fast"), "devices[0].speed").status(),
       "devices[0].speed", "must be a finite number, got 'fast'"},
      {"infinite_number", YamlNumber(ValueOf(".inf"), "tflops").status(), "tflops",
       "must be a finite number, got '.inf'"},
      {"list_for_number", YamlNumber(ValueOf("[1]"), "tflops").status(), "tflops",
       "must be a finite number, got a list"},
      {"missing_bool", YamlBool(ValueOf(""), "combine").status(), "combine",
       "must be true or false, got nothing"},
      {"word_for_bool", YamlBool(ValueOf("maybe"), "combine").status(), "combine",
       "must be true or false, got 'maybe'"},
      {"map_for_string", YamlString(ValueOf("{a: 1}"), "account").status(), "account",
       "must be a string, got a mapping"},
      {"scalar_for_list", YamlStringList(ValueOf("A*"), "env_allow").status(), "env_allow",
       "must be a list of strings, got 'A*'"},
      {"list_in_list", YamlStringList(ValueOf("[A, [B]]"), "env_allow").status(), "env_allow[1]",
       "must be a string, got a list"},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument) << r.name;
    EXPECT_EQ(r.status.field(), r.field) << r.name;
    EXPECT_EQ(r.status.message(), r.message) << r.name;
  }
}

}  // namespace
}  // namespace tessera
