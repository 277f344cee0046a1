// ImageConvention: the JSON shape of an exported model's image convention (a
// job spec's "image", a module's tessera.json), its value rules, Overlay, the
// worker flags it becomes, and "lo,hi" ranges.
#include "api/image_convention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "api/types.h"

namespace tessera::api {
namespace {

using Json = nlohmann::json;

// A convention with every member stated.
ImageConvention Colorizer() {
  ImageConvention c;
  c.input = "l";
  c.output = "ab";
  c.range = std::make_pair(-1.0, 1.0);
  c.align_px = 16;
  c.halo_px = 0;
  return c;
}

// ---- JSON: what is read comes back out, stated members only ----

struct RoundTripRow {
  const char* name;
  const char* json;
};

class ImageConventionRoundTripTest : public ::testing::TestWithParam<RoundTripRow> {};

TEST_P(ImageConventionRoundTripTest, ReadThenWrittenIsTheSame) {
  const Json in = Json::parse(GetParam().json);
  for (const std::string prefix : {"image", ""}) {
    auto c = ImageConventionFromJson(in, prefix);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(ToJson(*c), in);
    EXPECT_EQ(c->empty(), in.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ImageConventionRoundTripTest,
    ::testing::Values(
        RoundTripRow{"nothing_stated", "{}"}, RoundTripRow{"input_rgb", R"({"input":"rgb"})"},
        RoundTripRow{"input_gray", R"({"input":"gray"})"},
        RoundTripRow{"output_gray", R"({"output":"gray"})"},
        RoundTripRow{"output_scores", R"({"output":"scores"})"},
        RoundTripRow{"range_0_255", R"({"range":[0,255]})"},
        RoundTripRow{"range_fraction", R"({"range":[-0.5,0.75]})"},
        RoundTripRow{"align", R"({"align_px":1024})"},
        RoundTripRow{"halo_zero", R"({"halo_px":0})"},
        RoundTripRow{"halo_max", R"({"halo_px":4096})"},
        RoundTripRow{"colorizer",
                     R"({"input":"l","output":"ab","range":[-1,1],"align_px":16,"halo_px":0})"}),
    [](const ::testing::TestParamInfo<RoundTripRow>& info) {
      return std::string(info.param.name);
    });

TEST(ImageConventionJsonTest, DefaultsAreUnstated) {
  ImageConvention c;
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(ToJson(c), Json::object());
  EXPECT_FALSE(Colorizer().empty());
  auto null_members = ImageConventionFromJson(Json::parse(R"({"input":null,"range":null})"), "");
  ASSERT_TRUE(null_members.ok()) << null_members.status().ToString();
  EXPECT_TRUE(null_members->empty());
}

// ---- every error names its member, under the caller's prefix ----

struct ErrorRow {
  const char* name;
  const char* json;
  const char* member;  // "" names the object itself
};

class ImageConventionErrorTest : public ::testing::TestWithParam<ErrorRow> {};

TEST_P(ImageConventionErrorTest, NamesTheMember) {
  const ErrorRow& row = GetParam();
  const Json in = Json::parse(row.json);
  const std::string member = row.member;
  for (const std::string prefix : {"image", ""}) {
    auto c = ImageConventionFromJson(in, prefix);
    ASSERT_FALSE(c.ok()) << prefix;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    const std::string want = prefix.empty()   ? member
                             : member.empty() ? prefix
                                              : prefix + "." + member;
    EXPECT_EQ(c.status().field(), want) << c.status().ToString();
    EXPECT_FALSE(c.status().message().empty());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Rules, ImageConventionErrorTest,
    ::testing::Values(ErrorRow{"not_an_object", R"("rgb")", ""},
                      ErrorRow{"array", R"(["rgb"])", ""},
                      ErrorRow{"input_unknown", R"({"input":"cmyk"})", "input"},
                      ErrorRow{"input_upper_case", R"({"input":"RGB"})", "input"},
                      ErrorRow{"input_output_name", R"({"input":"ab"})", "input"},
                      ErrorRow{"input_not_a_string", R"({"input":3})", "input"},
                      ErrorRow{"output_unknown", R"({"output":"lab"})", "output"},
                      ErrorRow{"output_input_name", R"({"output":"l"})", "output"},
                      ErrorRow{"output_not_a_string", R"({"output":["rgb"]})", "output"},
                      ErrorRow{"range_not_an_array", R"({"range":"0,1"})", "range"},
                      ErrorRow{"range_one_number", R"({"range":[1]})", "range"},
                      ErrorRow{"range_three_numbers", R"({"range":[0,1,2]})", "range"},
                      ErrorRow{"range_strings", R"({"range":["0","1"]})", "range"},
                      ErrorRow{"range_equal", R"({"range":[1,1]})", "range"},
                      ErrorRow{"range_reversed", R"({"range":[1,-1]})", "range"},
                      ErrorRow{"range_too_large", R"({"range":[0,1e7]})", "range"},
                      ErrorRow{"range_too_small", R"({"range":[-1e7,0]})", "range"},
                      ErrorRow{"align_negative", R"({"align_px":-1})", "align_px"},
                      ErrorRow{"align_too_large", R"({"align_px":1025})", "align_px"},
                      ErrorRow{"align_not_an_integer", R"({"align_px":1.5})", "align_px"},
                      ErrorRow{"halo_below_probed", R"({"halo_px":-2})", "halo_px"},
                      ErrorRow{"halo_too_large", R"({"halo_px":4097})", "halo_px"},
                      ErrorRow{"halo_not_an_integer", R"({"halo_px":"8"})", "halo_px"},
                      ErrorRow{"unknown_member", R"({"tile_px":512})", "tile_px"}),
    [](const ::testing::TestParamInfo<ErrorRow>& info) { return std::string(info.param.name); });

// Values JSON cannot carry are refused too.
TEST(ValidateImageConventionTest, RangeMustBeFinite) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::nan("");
  for (std::pair<double, double> range : {std::make_pair(0.0, inf), std::make_pair(-inf, 1.0),
                                          std::make_pair(nan, 1.0), std::make_pair(0.0, nan)}) {
    ImageConvention c;
    c.range = range;
    Status st = ValidateImageConvention(c, "image");
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(st.field(), "image.range");
  }
  EXPECT_TRUE(ValidateImageConvention(Colorizer(), "image").ok());
  EXPECT_TRUE(ValidateImageConvention(ImageConvention{}, "image").ok());
}

// ---- Overlay: the stated members win, member by member ----

TEST(OverlayTest, StatedMembersWinMemberByMember) {
  ImageConvention module;  // what the module's tessera.json says
  module.input = "rgb";
  module.output = "rgb";
  module.range = std::make_pair(0.0, 1.0);
  module.align_px = 8;
  module.halo_px = 4;

  struct Row {
    const char* name;
    ImageConvention stated;
    ImageConvention want;
  };
  ImageConvention input_only;
  input_only.input = "gray";
  ImageConvention want_input = module;
  want_input.input = "gray";
  ImageConvention range_only;
  range_only.range = std::make_pair(-1.0, 1.0);
  ImageConvention want_range = module;
  want_range.range = std::make_pair(-1.0, 1.0);
  ImageConvention halo_zero;  // 0 is stated: only -1 means "probed"
  halo_zero.halo_px = 0;
  ImageConvention want_halo = module;
  want_halo.halo_px = 0;
  const Row rows[] = {
      {"nothing_stated", {}, module},           {"input", input_only, want_input},
      {"range", range_only, want_range},        {"halo_zero", halo_zero, want_halo},
      {"everything", Colorizer(), Colorizer()},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    EXPECT_EQ(Overlay(row.stated, module), row.want);
  }
  EXPECT_EQ(Overlay(input_only, ImageConvention{}), input_only) << "nothing beneath";
}

// ---- the worker's flags, stated members only, in order ----

TEST(ImageConventionArgsTest, StatedMembersBecomeFlagsInOrder) {
  using Argv = std::vector<std::string>;
  ImageConvention scores;
  scores.output = "scores";
  ImageConvention wide_range;
  wide_range.range = std::make_pair(0.0, 255.0);
  ImageConvention fractional;
  fractional.range = std::make_pair(-0.5, 0.25);
  ImageConvention halo_zero;
  halo_zero.halo_px = 0;
  struct Row {
    const char* name;
    ImageConvention c;
    Argv want;
  } rows[] = {
      {"nothing", {}, {}},
      {"output", scores, {"--image-output", "scores"}},
      {"range", wide_range, {"--value-range=0,255"}},
      {"fractional_range", fractional, {"--value-range=-0.5,0.25"}},
      {"halo_zero", halo_zero, {"--halo-px", "0"}},
      {"everything",
       Colorizer(),
       {"--image-input", "l", "--image-output", "ab", "--value-range=-1,1", "--align-px", "16",
        "--halo-px", "0"}},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    EXPECT_EQ(ImageConventionArgs(row.c), row.want);
  }
}

// ---- "lo,hi" ----

TEST(ParseValueRangeTest, GoodRanges) {
  struct Row {
    const char* text;
    std::pair<double, double> want;
  } rows[] = {
      {"0,1", {0, 1}},           {"-1,1", {-1, 1}},         {"0,255", {0, 255}},
      {"-0.5,0.5", {-0.5, 0.5}}, {"1e-3,2e2", {1e-3, 2e2}}, {"-1000000,1000000", {-1e6, 1e6}},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.text);
    auto r = ParseValueRange(row.text, "--value-range");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, row.want);
  }
}

TEST(ParseValueRangeTest, BadRangesNameTheField) {
  for (const char* text : {"", "1", "0;1", "0,", ",1", "a,b", "0,1x", "0,1,2", "1,0", "1,1",
                           "0,2e6", "-2e6,0", "nan,1", "0,inf"}) {
    SCOPED_TRACE(text);
    auto r = ParseValueRange(text, "--value-range");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().field(), "--value-range");
    EXPECT_FALSE(r.status().message().empty());
  }
}

// ---- in a job spec: "image", written only when stated ----

TEST(JobSpecImageTest, WrittenOnlyWhenStatedAndReadBack) {
  JobSpec spec;
  spec.name = "colorize";
  spec.kind = JobKind::kInfer;
  spec.entrypoint = "model:lab-unet";
  EXPECT_FALSE(ToJson(spec).contains("image"));
  auto plain = JobSpecFromJson(ToJson(spec));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_TRUE(plain->image.empty());

  spec.image = Colorizer();
  const Json j = ToJson(spec);
  EXPECT_EQ(j.at("image"), ToJson(Colorizer()));
  auto back = JobSpecFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, spec);
}

TEST(JobSpecImageTest, ErrorsNameImageMember) {
  struct Row {
    const char* image;
    const char* field;
  } rows[] = {
      {R"("rgb")", "image"},
      {R"({"input":"cmyk"})", "image.input"},
      {R"({"range":[1,0]})", "image.range"},
      {R"({"align_px":2048})", "image.align_px"},
      {R"({"halo":3})", "image.halo"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.image);
    Json j = Json::parse(R"({"name":"a","kind":"infer","entrypoint":"model:m"})");
    j["image"] = Json::parse(row.image);
    auto spec = JobSpecFromJson(j);
    ASSERT_FALSE(spec.ok());
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(spec.status().field(), row.field) << spec.status().ToString();
  }
}

}  // namespace
}  // namespace tessera::api
