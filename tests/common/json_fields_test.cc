#include "common/json_fields.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace tessera {
namespace {

using Json = nlohmann::json;

struct ErrorRow {
  const char* json;
  std::function<Status(JsonFields&)> read;
  const char* field;    // the error's field; nullptr: OK
  const char* message;  // the error's message when field is set
};

TEST(JsonFieldsTest, ErrorsNameTheFieldWithItsPrefix) {
  std::string s;
  int64_t i = 0;
  double d = 0;
  bool b = false;
  std::vector<std::string> list;
  std::vector<int64_t> ints;
  std::map<std::string, std::string> map;
  // The readers the rows use more than once.
  auto read_name = [&](JsonFields& f) { return f.String("name", &s); };
  auto read_n = [&](JsonFields& f) { return f.Int("n", &i); };
  auto read_args = [&](JsonFields& f) { return f.StringList("args", &list); };
  const ErrorRow rows[] = {
      // Optional members: absent or null is fine.
      {R"({})", read_name, nullptr, ""},
      {R"({"name":null})", read_name, nullptr, ""},
      // Required members.
      {R"({})", [&](JsonFields& f) { return f.String("name", &s, Presence::kRequired); },
       "outer.name", "is required"},
      {R"({"n":null})", [&](JsonFields& f) { return f.Int("n", &i, Presence::kRequired); },
       "outer.n", "is required"},
      // Wrong types.
      {R"({"name":3})", read_name, "outer.name", "must be a string"},
      {R"({"n":"3"})", read_n, "outer.n", "must be an integer"},
      {R"({"n":1.5})", read_n, "outer.n", "must be an integer"},
      {R"({"n":18446744073709551615})", read_n, "outer.n", "is out of range"},
      {R"({"x":"1"})", [&](JsonFields& f) { return f.Double("x", &d); }, "outer.x",
       "must be a number"},
      {R"({"on":1})", [&](JsonFields& f) { return f.Bool("on", &b); }, "outer.on",
       "must be true or false"},
      {R"({"args":"a"})", read_args, "outer.args", "must be an array of strings"},
      {R"({"args":["a",2]})", read_args, "outer.args[1]", "must be a string"},
      {R"({"ids":[1,"2"]})", [&](JsonFields& f) { return f.IntList("ids", &ints); }, "outer.ids[1]",
       "must be an integer"},
      {R"({"env":{"A":1}})", [&](JsonFields& f) { return f.StringMap("env", &map); }, "outer.env.A",
       "must be a string"},
      {R"({"items":{}})", [&](JsonFields& f) { return f.Array("items").status(); }, "outer.items",
       "must be an array"},
      {R"({"items":null})",
       [&](JsonFields& f) { return f.Array("items", Presence::kRequired).status(); }, "outer.items",
       "is required"},
  };
  for (const ErrorRow& row : rows) {
    const Json j = Json::parse(row.json);
    JsonFields fields(j, "outer");
    Status st = row.read(fields);
    if (row.field == nullptr) {
      EXPECT_TRUE(st.ok()) << row.json << ": " << st.ToString();
      continue;
    }
    ASSERT_FALSE(st.ok()) << row.json;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << row.json;
    EXPECT_EQ(st.field(), row.field) << row.json;
    EXPECT_EQ(st.message(), row.message) << row.json;
  }
}

TEST(JsonFieldsTest, ReadsValuesAndKeepsDefaultsOfAbsentMembers) {
  const Json j = Json::parse(
      R"({"name":"n","count":7,"big":9223372036854775807,"ratio":2,"on":true,
          "args":["a","b"],"ids":[3,4],"env":{"K":"V"},"items":[1],"raw":{"x":1},"skip":null})");
  JsonFields f(j);
  std::string name, absent = "kept";
  int64_t count = 0, big = 0;
  std::optional<int64_t> maybe, none;
  double ratio = 0;
  bool on = false;
  std::vector<std::string> args;
  std::vector<int64_t> ids;
  std::map<std::string, std::string> env;
  Json raw, missing = "kept";
  ASSERT_TRUE(f.CheckObject().ok());
  ASSERT_TRUE(f.String("name", &name, Presence::kRequired).ok());
  ASSERT_TRUE(f.String("nothing", &absent).ok());
  ASSERT_TRUE(f.Int("count", &count).ok());
  ASSERT_TRUE(f.Int("big", &big).ok());
  ASSERT_TRUE(f.Int("count", &maybe).ok());
  ASSERT_TRUE(f.Int("skip", &none).ok());
  ASSERT_TRUE(f.Double("ratio", &ratio).ok());
  ASSERT_TRUE(f.Bool("on", &on).ok());
  ASSERT_TRUE(f.StringList("args", &args).ok());
  ASSERT_TRUE(f.IntList("ids", &ids).ok());
  ASSERT_TRUE(f.StringMap("env", &env).ok());
  ASSERT_TRUE(f.Raw("raw", &raw).ok());
  ASSERT_TRUE(f.Raw("missing", &missing).ok());
  auto items = f.Array("items");
  auto no_items = f.Array("no_items");
  EXPECT_EQ(name, "n");
  EXPECT_EQ(absent, "kept");
  EXPECT_EQ(count, 7);
  EXPECT_EQ(big, INT64_MAX);
  EXPECT_EQ(maybe, 7);
  EXPECT_FALSE(none.has_value());
  EXPECT_EQ(ratio, 2.0);
  EXPECT_TRUE(on);
  EXPECT_EQ(args, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ids, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(env, (std::map<std::string, std::string>{{"K", "V"}}));
  EXPECT_EQ(raw, Json::parse(R"({"x":1})"));
  EXPECT_EQ(missing, "kept");
  ASSERT_TRUE(items.ok());
  ASSERT_NE(*items, nullptr);
  EXPECT_EQ((*items)->size(), 1u);
  ASSERT_TRUE(no_items.ok());
  EXPECT_EQ(*no_items, nullptr);
  EXPECT_TRUE(f.NoUnknownFields().ok()) << f.NoUnknownFields().ToString();
}

TEST(JsonFieldsTest, UnknownFieldsAndNonObjects) {
  const Json j = Json::parse(R"({"known":1,"extra":2})");
  JsonFields f(j, "spec");
  int64_t known = 0;
  ASSERT_TRUE(f.Int("known", &known).ok());
  Status unknown = f.NoUnknownFields();
  EXPECT_EQ(unknown.field(), "spec.extra");
  EXPECT_EQ(unknown.message(), "unknown field");

  const Json array = Json::array();
  JsonFields top(array);
  EXPECT_EQ(top.CheckObject().message(), "must be a JSON object");
  JsonFields nested(array, "replicas[2]");
  EXPECT_EQ(nested.CheckObject().field(), "replicas[2]");
  std::string s = "kept";
  EXPECT_TRUE(nested.String("name", &s).ok()) << "a non-object has no members";
  EXPECT_EQ(nested.String("name", &s, Presence::kRequired).field(), "replicas[2].name");
  EXPECT_EQ(s, "kept");
}

}  // namespace
}  // namespace tessera
