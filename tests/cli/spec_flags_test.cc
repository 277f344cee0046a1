// The spec flags of `submit` and `plan`: the image flags of a model: job
// fill spec.image member by member over a spec file's, and a bad one is an
// error naming the flag.
#include "cli/spec_flags.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "tests/cli/builders.h"
#include "tests/common/status_assertions.h"
#include "tests/common/temp_dir.h"

namespace tessera::cli {
namespace {

using Json = api::Json;

// A model: infer job's required flags.
std::vector<std::string> ModelJob() {
  return {"--name",    "colorize",   "--kind",   "infer",    "--entrypoint",   "model:lab-unet",
          "--dataset", "/srv/scans", "--output", "/srv/out", "--global-batch", "4"};
}

// Parses `args` as `submit`'s and builds the spec.
Result<api::JobSpec> SpecFrom(std::vector<std::string> args) {
  CLI::App app("submit");
  SubmitFlags f;
  AddSpecFlags(&app, &f);
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
  app.parse(args);
  return BuildSpec(app, f);
}

struct Row {
  const char* name;
  std::vector<std::string> flags;  // after ModelJob()
  const char* image;               // the spec's image as JSON, when built
  const char* field;               // the error's field, when refused
};

class ImageFlagsTest : public ::testing::TestWithParam<Row> {};

TEST_P(ImageFlagsTest, FillTheImageOrNameTheFlag) {
  const Row& row = GetParam();
  std::vector<std::string> args = ModelJob();
  args.insert(args.end(), row.flags.begin(), row.flags.end());
  auto spec = SpecFrom(args);
  if (row.field == nullptr) {
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    EXPECT_EQ(api::ToJson(spec->image), Json::parse(row.image));
  } else {
    ASSERT_FALSE(spec.ok());
    EXPECT_TRUE(::tessera::testing::InvalidArgumentNaming(spec.status(), row.field));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Flags, ImageFlagsTest,
    ::testing::Values(
        Row{"none", {}, "{}", nullptr},
        Row{"input", {"--image-input", "gray"}, R"({"input":"gray"})", nullptr},
        Row{"output", {"--image-output", "scores"}, R"({"output":"scores"})", nullptr},
        Row{"range", {"--value-range", "0,255"}, R"({"range":[0,255]})", nullptr},
        Row{"negative_range", {"--value-range=-1,1"}, R"({"range":[-1,1]})", nullptr},
        Row{"align", {"--align-px", "16"}, R"({"align_px":16})", nullptr},
        Row{"halo_zero", {"--halo-px", "0"}, R"({"halo_px":0})", nullptr},
        Row{"every_member",
            {"--image-input", "l", "--image-output", "ab", "--value-range", "-1,1", "--align-px",
             "16", "--halo-px", "24"},
            R"({"input":"l","output":"ab","range":[-1,1],"align_px":16,"halo_px":24})",
            nullptr},
        Row{"input_unknown", {"--image-input", "cmyk"}, nullptr, "--image-input"},
        Row{"output_unknown", {"--image-output", "lab"}, nullptr, "--image-output"},
        Row{"range_one_number", {"--value-range", "1"}, nullptr, "--value-range"},
        Row{"range_reversed", {"--value-range", "1,0"}, nullptr, "--value-range"},
        Row{"range_text", {"--value-range", "black,white"}, nullptr, "--value-range"},
        Row{"align_too_large", {"--align-px", "2048"}, nullptr, "--align-px"},
        Row{"align_negative", {"--align-px=-4"}, nullptr, "--align-px"},
        Row{"halo_below_probed", {"--halo-px=-2"}, nullptr, "--halo-px"},
        Row{"halo_too_large", {"--halo-px", "5000"}, nullptr, "--halo-px"},
        // The spec's own rules still apply, named by the flag that set the member.
        Row{"model_with_checkpoint", {"--checkpoint", "/srv/ckpt"}, nullptr, "--checkpoint"}),
    [](const ::testing::TestParamInfo<Row>& info) { return std::string(info.param.name); });

// The image convention is an exported model's: a builtin job is refused it.
TEST(ImageFlagsTest, ABuiltinJobTakesNone) {
  auto spec =
      SpecFrom({"--name", "colorize", "--kind", "infer", "--entrypoint", "builtin:colorize-unet",
                "--dataset", "/srv/scans", "--output", "/srv/out", "--checkpoint", "/srv/ckpt",
                "--global-batch", "4", "--image-input", "rgb"});
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().field(), "image") << spec.status().ToString();
}

// A flag replaces its own member of the file's image; the others stay.
TEST(ImageFlagsOverFileTest, EachFlagReplacesItsMember) {
  tessera::testing::TempDir dir;
  const std::string path =
      testing::WriteFile(dir, "job.json",
                         R"({"name":"colorize","kind":"infer","entrypoint":"model:lab-unet",)"
                         R"("dataset":"/srv/scans","output":"/srv/out","global_batch":4,)"
                         R"("image":{"input":"rgb","range":[0,1],"halo_px":8}})");
  auto spec = SpecFrom({path, "--image-input", "gray", "--value-range", "-1,1"});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(api::ToJson(spec->image),
            Json::parse(R"({"input":"gray","range":[-1,1],"halo_px":8})"));
}

}  // namespace
}  // namespace tessera::cli

namespace tessera::cli {
namespace {

// `--no-elastic` keeps the job on the devices it starts on; `--elastic` over
// a spec file's false makes it elastic again; neither: the file's, else true.
TEST(SpecFlagsTest, ElasticIsAFlagBothWays) {
  struct Row {
    const char* name;
    std::vector<std::string> flags;
    bool file_elastic;  // the spec file's value (written only when false)
    bool want;
  };
  const Row rows[] = {
      {"default", {}, true, true},
      {"no-elastic", {"--no-elastic"}, true, false},
      {"elastic", {"--elastic"}, true, true},
      {"the file's false", {}, false, false},
      {"--elastic over the file's false", {"--elastic"}, false, true},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    ::tessera::testing::TempDir dir;
    const std::string file = (dir.path() / "job.json").string();
    std::ofstream(file) << (row.file_elastic ? R"({})" : R"({"elastic": false})");
    std::vector<std::string> args = {file};
    const std::vector<std::string> job = ModelJob();
    args.insert(args.end(), job.begin(), job.end());
    args.insert(args.end(), row.flags.begin(), row.flags.end());
    auto spec = SpecFrom(args);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    EXPECT_EQ(spec->elastic, row.want);
  }
}

}  // namespace
}  // namespace tessera::cli
