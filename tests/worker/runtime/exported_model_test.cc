// Exported modules (TorchScript, made here with torch::jit::Module::define,
// as torch.jit.script would): loading, what the probe finds of each module's
// image convention, the errors a bad file or a module that does not fit
// gives, outputs equal to the module's own forward, and tiles equal to whole
// images.
#include "worker/runtime/exported_model.h"

#include <gtest/gtest.h>
#include <torch/script.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "tests/worker/runtime/infer_test_util.h"
#include "worker/data/image_folder_dataset.h"
#include "worker/runtime/inference_model.h"

namespace tessera::worker {
namespace {

namespace fs = std::filesystem;
using testing::MakeTempDir;
using testing::TestImage;

// A TorchScript module with `params` (name -> tensor) and `source` (its
// forward), saved to dir/name.pt with an optional tessera.json.
struct ModuleBuilder {
  std::string name;
  std::vector<std::pair<std::string, torch::Tensor>> params;
  std::string source;
  std::string tessera_json;

  fs::path SaveIn(const fs::path& dir) const {
    torch::jit::Module m(name);
    for (const auto& [n, t] : params) m.register_parameter(n, t, /*is_buffer=*/false);
    m.define(source);
    std::unordered_map<std::string, std::string> extra;
    if (!tessera_json.empty()) extra["tessera.json"] = tessera_json;
    const fs::path path = dir / (name + ".pt");
    m.save(path.string(), extra);
    return path;
  }
};

torch::Tensor Weights(std::vector<int64_t> shape, uint64_t seed) {
  torch::manual_seed(seed);
  return torch::randn(shape) * 0.3;
}

const char kConv[] = R"(
def forward(self, x):
    return torch.conv2d(x, self.w, self.b, [1, 1], [1, 1])
)";
const char kTwoConvs[] = R"(
def forward(self, x):
    y = torch.relu(torch.conv2d(x, self.w1, self.b1, [1, 1], [1, 1]))
    return torch.sigmoid(torch.conv2d(y, self.w2, self.b2, [1, 1], [1, 1]))
)";

ModuleBuilder Conv(const std::string& name, int64_t in, int64_t out) {
  return {name, {{"w", Weights({out, in, 3, 3}, 1)}, {"b", torch::zeros({out})}}, kConv, ""};
}
ModuleBuilder TwoConvs(const std::string& name, int64_t in, int64_t mid, int64_t out) {
  return {name,
          {{"w1", Weights({mid, in, 3, 3}, 2)},
           {"b1", torch::zeros({mid})},
           {"w2", Weights({out, mid, 3, 3}, 3)},
           {"b2", torch::zeros({out})}},
          kTwoConvs,
          ""};
}

class ExportedModelTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("exported"); }
  void TearDown() override { fs::remove_all(dir_); }

  Result<std::unique_ptr<InferenceModel>> Load(const ModuleBuilder& b,
                                               const api::ImageConvention& stated = {}) {
    return InferenceModel::LoadExported(b.SaveIn(dir_).string(), stated, "cpu", 1.0);
  }
  fs::path dir_;
};

struct ProbeCase {
  std::string label;
  ModuleBuilder module;
  api::ImageConvention stated;
  std::string input, output;
  std::pair<double, double> range;
  int64_t align, halo;
  bool halo_bounded;
};

TEST_F(ExportedModelTest, TheProbeFindsWhatTheModuleLeavesUnstated) {
  ModuleBuilder pooled{"pooled",
                       {{"w", Weights({3, 3, 1, 1}, 4)}, {"b", torch::zeros({3})}},
                       R"(
def forward(self, x):
    y = torch.avg_pool2d(x, [4, 4])
    y = torch.repeat_interleave(torch.repeat_interleave(y, 4, 2), 4, 3)
    return torch.conv2d(y, self.w, self.b, [1, 1], [0, 0])
)",
                       ""};
  ModuleBuilder scores{"scores",
                       {},
                       R"(
def forward(self, x):
    return torch.mean(x, [2, 3])
)",
                       ""};
  ModuleBuilder global{"globalmean",
                       {{"w", Weights({3, 3, 3, 3}, 5)}},
                       R"(
def forward(self, x):
    y = torch.conv2d(x, self.w, None, [1, 1], [1, 1])
    return y - torch.mean(y)
)",
                       ""};
  ModuleBuilder told = Conv("told", 1, 3);
  told.tessera_json = R"({"input": "gray", "range": [-1, 1], "halo_px": 5})";
  api::ImageConvention spec_range;
  spec_range.range = std::make_pair(0.0, 255.0);
  api::ImageConvention spec_over_module;
  spec_over_module.halo_px = 7;

  const std::vector<ProbeCase> cases = {
      {"gray in, rgb out", Conv("g2rgb", 1, 3), {}, "gray", "rgb", {0, 1}, 1, 1, true},
      {"rgb denoiser, two convolutions",
       TwoConvs("dn", 3, 8, 3),
       {},
       "rgb",
       "rgb",
       {0, 1},
       1,
       2,
       true},
      {"L in, ab out", Conv("l2ab", 1, 2), {}, "l", "ab", {0, 1}, 1, 1, true},
      {"pooling by 4 needs sides of multiples of 4", pooled, {}, "rgb", "rgb", {0, 1}, 4, 3, true},
      {"global mean: scores", scores, {}, "rgb", "scores", {0, 1}, 1, 0, true},
      {"a global term reaches every pixel", global, {}, "rgb", "rgb", {0, 1}, 1, 192, false},
      {"tessera.json states input, range and halo", told, {}, "gray", "rgb", {-1, 1}, 1, 5, true},
      {"the spec's range", Conv("spec", 3, 3), spec_range, "rgb", "rgb", {0, 255}, 1, 1, true},
      {"the spec over tessera.json", told, spec_over_module, "gray", "rgb", {-1, 1}, 1, 7, true},
  };
  for (const ProbeCase& c : cases) {
    SCOPED_TRACE(c.label);
    auto m = Load(c.module, c.stated);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const api::ImageConvention& got = (*m)->convention();
    EXPECT_EQ(got.input, c.input);
    EXPECT_EQ(got.output, c.output);
    ASSERT_TRUE(got.range.has_value());
    EXPECT_EQ(*got.range, c.range);
    EXPECT_EQ(got.align_px, c.align);
    EXPECT_EQ(got.halo_px, c.halo);
    EXPECT_EQ((*m)->halo_bounded(), c.halo_bounded);
    EXPECT_EQ((*m)->spatial(), c.output != "scores");
    EXPECT_EQ((*m)->geometry().align_px, c.align);
    EXPECT_EQ((*m)->input_channels(), c.input == "rgb" ? 3 : 1);
    // Nothing measures a plain CPU's memory.
    EXPECT_EQ((*m)->bytes_per_pixel(), -1);
  }
}

struct ErrorCase {
  std::string label;
  std::function<fs::path(const fs::path&)> make;
  api::ImageConvention stated;
  std::string field;
  std::string message_part;
};

TEST_F(ExportedModelTest, ABadFileOrAModuleThatDoesNotFitIsAnErrorNamingTheField) {
  auto save = [](ModuleBuilder b) { return [b](const fs::path& dir) { return b.SaveIn(dir); }; };
  ModuleBuilder shrinks{"shrinks",
                        {{"w", Weights({3, 3, 3, 3}, 6)}},
                        R"(
def forward(self, x):
    return torch.conv2d(x, self.w, None, [1, 1], [0, 0])
)",
                        ""};
  ModuleBuilder bad_json = Conv("badjson", 3, 3);
  bad_json.tessera_json = R"({"range": [1, 0]})";
  ModuleBuilder not_json = Conv("notjson", 3, 3);
  not_json.tessera_json = "{range";
  api::ImageConvention says_gray_out;
  says_gray_out.output = "gray";
  api::ImageConvention says_rgb_in;
  says_rgb_in.input = "rgb";
  api::ImageConvention ab_from_gray;
  ab_from_gray.input = "gray";

  const std::vector<ErrorCase> cases = {
      {"no such file",
       [](const fs::path& d) { return d / "missing.pt"; },
       {},
       "model-file",
       "does not exist"},
      {"not a PyTorch archive",
       [](const fs::path& d) {
         std::ofstream(d / "junk.pt") << "these are not the bytes of a module";
         return d / "junk.pt";
       },
       {},
       "model-file",
       "neither a TorchScript file nor an AOTInductor package"},
      {"a module that shrinks the image", save(shrinks), {}, "model-file", "shape mismatch"},
      {"a module that takes two channels",
       save(Conv("two", 2, 3)),
       {},
       "model-file",
       "does not take images"},
      {"five channels out", save(Conv("five", 3, 5)), {}, "model-file", "Tessera writes images"},
      {"the spec's output contradicts the module", save(Conv("rgb", 3, 3)), says_gray_out,
       "image.output", "module gives [1, 3, 128, 128]"},
      {"the spec's input contradicts the module", save(Conv("gray", 1, 3)), says_rgb_in,
       "image.input", "does not take 3-channel images"},
      {"ab out needs L in", save(Conv("ab", 1, 2)), ab_from_gray, "image.input", "must be \"l\""},
      {"tessera.json with white below black",
       save(bad_json),
       {},
       "tessera.json.range",
       "black must be below white"},
      {"tessera.json that is not JSON", save(not_json), {}, "tessera.json", "not valid JSON"},
  };
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.label);
    auto m = InferenceModel::LoadExported(c.make(dir_).string(), c.stated, "cpu", 1.0);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument) << m.status().ToString();
    EXPECT_EQ(m.status().field(), c.field) << m.status().ToString();
    EXPECT_NE(m.status().message().find(c.message_part), std::string::npos)
        << m.status().ToString();
  }
}

// Prepare maps the image into the stated range; the forward is the module's
// own; WriteOutput maps the range back.
TEST_F(ExportedModelTest, OutputsAreTheModulesOwnForwardOfThePreparedImage) {
  ModuleBuilder b = TwoConvs("ganlike", 1, 6, 3);
  b.source = R"(
def forward(self, x):
    y = torch.relu(torch.conv2d(x, self.w1, self.b1, [1, 1], [1, 1]))
    return torch.tanh(torch.conv2d(y, self.w2, self.b2, [1, 1], [1, 1]))
)";
  b.tessera_json = R"({"input": "gray", "output": "rgb", "range": [-1, 1]})";
  const fs::path path = b.SaveIn(dir_);
  auto m = InferenceModel::LoadExported(path.string(), {}, "cpu", 1.0);
  ASSERT_TRUE(m.ok()) << m.status().ToString();

  const Image image = TestImage(70, 45, 1, 9);
  auto input = (*m)->Prepare(image);
  ASSERT_TRUE(input.ok());
  ASSERT_EQ(input->sizes(), (std::vector<int64_t>{1, 45, 70}));
  const torch::Tensor rgb = ImageToTensor(image);
  const torch::Tensor luma = (0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]).unsqueeze(0);
  EXPECT_TRUE(torch::allclose(*input, luma * 2 - 1, 0, 1e-6));

  auto out = RunImage(**m, *input, std::nullopt);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  torch::jit::Module module = torch::jit::load(path.string());
  const torch::Tensor direct = module.forward({input->unsqueeze(0)}).toTensor().squeeze(0);
  EXPECT_TRUE(torch::equal(*out, direct));

  const fs::path png = dir_ / "out.png";
  ASSERT_TRUE((*m)->WriteOutput(png.string(), "x.png", 3, *input, *out).ok());
  auto written = ReadImage(png.string());
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(written->channels, 3);
  const torch::Tensor expect =
      ((direct + 1) / 2).clamp(0, 1).mul(255).round().to(torch::kUInt8).permute({1, 2, 0});
  EXPECT_TRUE(torch::equal(torch::from_blob(written->pixels.data(), {45, 70, 3}, torch::kUInt8),
                           expect.contiguous()));
}

TEST_F(ExportedModelTest, TilesOfAnExportedModelEqualTheWholeImage) {
  auto m = Load(TwoConvs("dn", 3, 8, 3));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto input = (*m)->Prepare(TestImage(203, 150, 2, 5));
  ASSERT_TRUE(input.ok());
  auto whole = RunImage(**m, *input, std::nullopt);
  ASSERT_TRUE(whole.ok());
  auto spec = EffectiveTileSpec(TileSpec{48, 0}, (*m)->geometry());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto tiled = RunImage(**m, *input, *spec);
  ASSERT_TRUE(tiled.ok());
  EXPECT_LT((*tiled - *whole).abs().max().item<float>(), 1e-5);
}

}  // namespace
}  // namespace tessera::worker
