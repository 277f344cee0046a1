#include "api/json_codec.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/types.h"

namespace tessera::api {
namespace {

using Json = nlohmann::json;

enum class Colour { kRed, kBlue };

std::string_view ColourName(Colour c) { return c == Colour::kBlue ? "blue" : "red"; }

std::optional<Colour> ParseColour(std::string_view name) {
  if (name == "red") return Colour::kRed;
  if (name == "blue") return Colour::kBlue;
  return std::nullopt;
}

// One member of every kind the table knows.
struct Sample {
  std::string name;
  int64_t count = 7;
  double ratio = 0.5;
  bool on = false;
  std::vector<std::string> tags;
  std::map<std::string, std::string> labels;
  std::optional<int64_t> since;
  Json extra;
  Colour colour = Colour::kRed;
  int64_t doubled = 0;  // written twice its value, read back halved
};

Json DoubledJson(const Sample& s) { return s.doubled * 2; }

Status ReadDoubled(JsonFields& fields, std::string_view key, Sample* s) {
  int64_t twice = 0;
  TESSERA_RETURN_IF_ERROR(fields.Int(key, &twice));
  if (twice % 2 != 0) return InvalidArgument("must be even", fields.Name(key));
  s->doubled = twice / 2;
  return Status::Ok();
}

constexpr JsonMember<Sample> kSampleMembers[] = {
    {"name", &Sample::name, Presence::kRequired},
    {"count", &Sample::count},
    {"ratio", &Sample::ratio},
    {"on", &Sample::on},
    {"tags", &Sample::tags},
    {"labels", &Sample::labels},
    {"since", &Sample::since},
    {"extra", &Sample::extra},
    {"colour", EnumMember<&Sample::colour, &ColourName, &ParseColour>("must be red or blue")},
    {"doubled", JsonCustom<Sample>{&DoubledJson, &ReadDoubled}},
};

Result<Sample> Read(const Json& j, std::string prefix = {}) {
  Sample s;
  JsonFields fields(j, std::move(prefix));
  TESSERA_RETURN_IF_ERROR(ReadJsonMembers(kSampleMembers, fields, &s));
  return s;
}

TEST(JsonCodecTest, WritesEveryMemberAsItsJsonType) {
  Sample s{"a",           3, 1.5, true, {"x"}, {{"k", "v"}}, std::nullopt, Json{{"any", 1}},
           Colour::kBlue, 4};
  EXPECT_EQ(MembersToJson(kSampleMembers, s),
            Json::parse(R"({"name":"a","count":3,"ratio":1.5,"on":true,"tags":["x"],
                            "labels":{"k":"v"},"since":null,"extra":{"any":1},
                            "colour":"blue","doubled":8})"));
  s.since = 9;
  EXPECT_EQ(MembersToJson(kSampleMembers, s)["since"], 9);
  EXPECT_TRUE(MembersToJson(kSampleMembers, s)["count"].is_number_integer());
}

TEST(JsonCodecTest, ReadsBackWhatItWrites) {
  Sample s{"a", 3, 1.5, true, {"x", "y"}, {{"k", "v"}}, 12, Json::array({1}), Colour::kBlue, 4};
  Result<Sample> back = Read(MembersToJson(kSampleMembers, s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(MembersToJson(kSampleMembers, *back), MembersToJson(kSampleMembers, s));
}

TEST(JsonCodecTest, AbsentOrNullMembersKeepTheirValues) {
  Result<Sample> s = Read(Json{{"name", "a"}, {"count", nullptr}, {"colour", nullptr}});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->count, 7);
  EXPECT_EQ(s->ratio, 0.5);
  EXPECT_EQ(s->colour, Colour::kRed);
  EXPECT_FALSE(s->since.has_value());
}

TEST(JsonCodecTest, ErrorsNameTheFirstMemberInTableOrder) {
  struct Row {
    const char* body;
    const char* field;
    const char* message;
  };
  const Row rows[] = {
      {R"({})", "name", "is required"},
      {R"({"name":1})", "name", "must be a string"},
      {R"({"name":"a","count":"3"})", "count", "must be an integer"},
      {R"({"name":"a","ratio":"x","count":"3"})", "count", "must be an integer"},
      {R"({"name":"a","on":1})", "on", "must be true or false"},
      {R"({"name":"a","tags":["x",2]})", "tags[1]", "must be a string"},
      {R"({"name":"a","labels":{"k":1}})", "labels.k", "must be a string"},
      {R"({"name":"a","since":1.5})", "since", "must be an integer"},
      {R"({"name":"a","colour":"green"})", "colour", "must be red or blue"},
      {R"({"name":"a","colour":3})", "colour", "must be a string"},
      {R"({"name":"a","doubled":3})", "doubled", "must be even"},
  };
  for (const Row& row : rows) {
    Result<Sample> s = Read(Json::parse(row.body));
    ASSERT_FALSE(s.ok()) << row.body;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << row.body;
    EXPECT_EQ(s.status().field(), row.field) << row.body;
    EXPECT_EQ(s.status().message(), row.message) << row.body;
  }
  EXPECT_EQ(Read(Json{{"name", "a"}, {"colour", "green"}}, "x").status().field(), "x.colour");
}

TEST(JsonCodecTest, ArraysOfStructs) {
  const std::vector<Sample> samples = {{.name = "a"}, {.name = "b", .doubled = 1}};
  Json array =
      ToJsonArray(samples, [](const Sample& s) { return MembersToJson(kSampleMembers, s); });
  ASSERT_EQ(array.size(), 2u);
  EXPECT_EQ(array[1]["doubled"], 2);
  EXPECT_EQ(ToJsonArray(std::vector<Sample>{}, DoubledJson), Json::array());

  auto parse = [](const Json& j) { return Read(j); };
  std::vector<Sample> back;
  ASSERT_TRUE(ReadJsonList(&array, "samples", parse, &back).ok());
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].doubled, 1);
  EXPECT_TRUE(ReadJsonList(nullptr, "samples", parse, &back).ok());
  EXPECT_EQ(back.size(), 2u);

  Json bad = Json::array({Json{{"name", "a"}}, Json{{"name", "b"}, {"on", 1}}});
  EXPECT_EQ(ReadJsonList(&bad, "samples", parse, &back).field(), "samples[1].on");
  Json not_objects = Json::array({Json{{"name", "a"}}, 5});
  auto must_be_object = [](const Json& j) -> Result<Sample> {
    if (!j.is_object()) return InvalidArgument("must be an object");
    return Read(j);
  };
  EXPECT_EQ(ReadJsonList(&not_objects, "samples", must_be_object, &back).field(), "samples[1]");

  Json doc = {{"samples", 3}};
  JsonFields fields(doc);
  EXPECT_EQ(ReadJsonList(fields, "samples", parse, &back).message(), "must be an array");
}

TEST(JsonCodecTest, JsonOrNull) {
  EXPECT_EQ(JsonOrNull(std::optional<int64_t>()), Json(nullptr));
  EXPECT_EQ(JsonOrNull(std::optional<int64_t>(4)), Json(4));
}

}  // namespace
}  // namespace tessera::api

namespace tessera::api {
namespace {

// JobSpec::elastic: true unless the spec says false; a non-boolean is refused
// naming the field.
TEST(JobSpecElasticTest, DefaultsToTrueAndReadsBack) {
  auto absent = JobSpecFromJson(Json{{"entrypoint", "builtin:colorize-unet"}});
  ASSERT_TRUE(absent.ok()) << absent.status().ToString();
  EXPECT_TRUE(absent->elastic);
  JobSpec spec = *absent;
  spec.elastic = false;
  const Json written = ToJson(spec);
  EXPECT_EQ(written.at("elastic"), false);
  auto back = JobSpecFromJson(written);
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->elastic);
  auto wrong = JobSpecFromJson(Json{{"elastic", "no"}});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().field(), "elastic");
}

}  // namespace
}  // namespace tessera::api
