// An exported module on a device with little memory (the emulated device's
// counting allocator, as a GPU's caching allocator would be measured): the
// probe measures the bytes a forward takes per pixel, and a scan too large to
// run whole within the device's free memory is tiled to fit, with the same
// outputs as the whole image on a device without a limit. Its own binary:
// the allocator is process-wide.
#include <gtest/gtest.h>
#include <torch/script.h>

#include <atomic>
#include <filesystem>

#include "tests/worker/runtime/infer_test_util.h"
#include "worker/runtime/emulated_memory.h"
#include "worker/runtime/inference.h"

namespace tessera::worker {
namespace {

namespace fs = std::filesystem;
using testing::MakeTempDir;
using testing::TestImage;

constexpr int64_t kMid = 16;

fs::path SaveDenoiser(const fs::path& dir) {
  torch::manual_seed(2);
  torch::jit::Module m("denoiser");
  m.register_parameter("w1", torch::randn({kMid, 3, 3, 3}) * 0.3, false);
  m.register_parameter("w2", torch::randn({3, kMid, 3, 3}) * 0.3, false);
  m.define(R"(
def forward(self, x):
    y = torch.relu(torch.conv2d(x, self.w1, None, [1, 1], [1, 1]))
    return x - 0.1 * torch.conv2d(y, self.w2, None, [1, 1], [1, 1])
)");
  const fs::path path = dir / "denoiser.pt";
  m.save(path.string());
  return path;
}

Result<InferOutcome> RunLocal(const fs::path& model, const fs::path& data, const fs::path& out,
                              int64_t max_tile_px = 0) {
  InferOptions o;
  o.max_tile_px = max_tile_px;
  o.model_file = model.string();
  o.data = data.string();
  o.output = out.string();
  o.local = true;
  DistEnv env;
  std::atomic<bool> stop{false};
  return RunInference(o, env, stop, nullptr);
}

TEST(ExportedMemoryTest, ALargeScanIsTiledToFitTheDevicesFreeMemory) {
  const fs::path dir = MakeTempDir("exported-memory");
  const fs::path model = SaveDenoiser(dir), data = dir / "scans";
  fs::create_directories(data);
  ASSERT_TRUE(WritePng((data / "scan.png").string(), TestImage(640, 600, 2, 1)).ok());

  // Counted, no limit: the probe measures, nothing bounds the forward.
  EmulatedMemory::Install(0);
  auto free = InferenceModel::LoadExported(model.string(), {}, "cpu", 1.0);
  ASSERT_TRUE(free.ok()) << free.status().ToString();
  const int64_t bpp = (*free)->bytes_per_pixel();
  // At least the input, the 16-channel activation and the output in float.
  EXPECT_GE(bpp, int64_t{4} * (3 + kMid + 3));
  EXPECT_LE(bpp, int64_t{4} * 8 * (3 + kMid + 3)) << "far more than the tensors a forward holds";
  auto whole = RunLocal(model, data, dir / "whole");
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(whole->forwards, 1);

  // A limit that holds the model and a forward of about a quarter of the scan.
  const int64_t forward_bytes = bpp * 640 * 600;
  EmulatedMemory::Install(EmulatedMemory::in_use_bytes() + forward_bytes / 3);
  // Whole (tiles larger than the scan), the forward runs out of memory...
  auto too_big = RunLocal(model, data, dir / "too-big", 4096);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), StatusCode::kResourceExhausted) << too_big.status().ToString();
  // ...so the worker's own choice tiles it, and it fits.
  auto tiled = RunLocal(model, data, dir / "tiled");
  ASSERT_TRUE(tiled.ok()) << tiled.status().ToString();
  EXPECT_EQ(tiled->written, 1);

  auto a = ReadImage((dir / "whole" / "scan.png").string());
  auto b = ReadImage((dir / "tiled" / "scan.png").string());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->pixels.size(), b->pixels.size());
  int worst = 0;
  for (size_t i = 0; i < a->pixels.size(); ++i) {
    worst = std::max(worst, std::abs(int{a->pixels[i]} - int{b->pixels[i]}));
  }
  EXPECT_LE(worst, 1);
  EmulatedMemory::Install(0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera::worker
