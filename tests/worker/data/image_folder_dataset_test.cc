#include "worker/data/image_folder_dataset.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "worker/data/color.h"
#include "worker/data/sample_images.h"
#include "worker/data/sharding.h"

namespace tessera::worker {
namespace {

namespace fs = std::filesystem;

// 9 generated PNGs of 40x40 (so a 32 crop has freedom), plus one JPEG.
class DatasetTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // One folder per process: ctest runs each test of this suite as its own process,
    // side by side, and a shared folder was removed under a running neighbour.
    dir_ = testing::TempDir() + "/tessera_dataset_test-" + std::to_string(::getpid());
    fs::remove_all(dir_);
    ASSERT_TRUE(GenerateSampleImages(dir_, 9, 40, 21).ok());
    ASSERT_TRUE(WriteJpeg(dir_ + "/zz-photo-00-checker.jpg", GenerateSampleImage(3, 40, 5)).ok());
    std::ofstream(dir_ + "/notes.txt") << "not an image";
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static DatasetOptions Opts(DataTask task) {
    DatasetOptions o;
    o.task = task;
    o.image_size = 32;
    o.seed = 4;
    return o;
  }
  static std::shared_ptr<const ImageFolderDataset> Open(const DatasetOptions& o) {
    auto ds = ImageFolderDataset::Open(dir_, o);
    EXPECT_TRUE(ds.ok()) << ds.status().ToString();
    return ds.ok() ? *ds : nullptr;
  }
  static std::string dir_;
};
std::string DatasetTest::dir_;

TEST_F(DatasetTest, ListsImagesSortedWithStableIds) {
  auto ds = Open(Opts(DataTask::kColorize));
  ASSERT_EQ(ds->size(), 10);
  EXPECT_EQ(fs::path(ds->path(0)).filename(), "sample-00000-gradient.png");
  EXPECT_EQ(fs::path(ds->path(9)).filename(), "zz-photo-00-checker.jpg");

  // A list file with relative paths, comments and blank lines.
  const std::string list = dir_ + "/list.txt";
  std::ofstream(list) << "# two images\nsample-00003-checker.png\n\n  sample-00001-circles.png\n";
  auto from_list = ImageFolderDataset::Open(list, Opts(DataTask::kClassify));
  ASSERT_TRUE(from_list.ok()) << from_list.status().ToString();
  ASSERT_EQ((*from_list)->size(), 2);
  EXPECT_EQ((*from_list)->label(0), 3);
  EXPECT_EQ((*from_list)->label(1), 1);

  EXPECT_EQ(ImageFolderDataset::Open(dir_ + "/nope", Opts(DataTask::kColorize)).status().code(),
            StatusCode::kNotFound);
  std::ofstream(dir_ + "/bad_list.txt") << "missing.png\n";
  EXPECT_EQ(
      ImageFolderDataset::Open(dir_ + "/bad_list.txt", Opts(DataTask::kColorize)).status().code(),
      StatusCode::kInvalidArgument);
}

TEST_F(DatasetTest, ColorizePairsAreLabOfTheSameCrop) {
  DatasetOptions o = Opts(DataTask::kColorize);
  o.augment = false;
  auto ds = Open(o);
  auto ex = ds->Get(1, 0);
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  EXPECT_EQ(ex->input.sizes().vec(), (std::vector<int64_t>{1, 32, 32}));
  EXPECT_EQ(ex->target.sizes().vec(), (std::vector<int64_t>{2, 32, 32}));
  EXPECT_GE(ex->input.min().item<float>(), -1.0f);
  EXPECT_LE(ex->input.max().item<float>(), 1.0f);
  EXPECT_GT(ex->target.abs().mean().item<float>(), 0.05f) << "sample images have colour";
  // Centre crop (offset 4) of the decoded image, converted pixel by pixel.
  auto img = ReadImage(ds->path(1));
  ASSERT_TRUE(img.ok());
  const int64_t y = 10, x = 20;
  const Rgb rgb{img->at(y + 4, x + 4, 0) / 255.0f, img->at(y + 4, x + 4, 1) / 255.0f,
                img->at(y + 4, x + 4, 2) / 255.0f};
  const Lab lab = RgbToLab(rgb);
  EXPECT_NEAR(ex->input[0][y][x].item<float>(), NormalizeL(lab.l), 1e-4);
  EXPECT_NEAR(ex->target[0][y][x].item<float>(), NormalizeAb(lab.a), 1e-4);
  EXPECT_NEAR(ex->target[1][y][x].item<float>(), NormalizeAb(lab.b), 1e-4);
  // Back to RGB.
  const torch::Tensor back = LabNormToRgb(ex->input, ex->target);
  EXPECT_NEAR(back[0][y][x].item<float>(), rgb.r, 1e-3);
}

TEST_F(DatasetTest, AugmentationIsDeterministicPerSeedEpochAndId) {
  auto ds = Open(Opts(DataTask::kColorize));
  auto a = ds->Get(2, 0), b = ds->Get(2, 0), c = ds->Get(2, 1);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_TRUE(torch::equal(a->input, b->input));
  EXPECT_TRUE(torch::equal(a->target, b->target));
  bool differs = false;  // some epoch crops or flips differently
  for (int64_t e = 1; e < 6 && !differs; ++e) {
    differs = !torch::equal(a->input, ds->Get(2, e)->input);
  }
  EXPECT_TRUE(differs);
}

TEST_F(DatasetTest, DenoiseAddsDeterministicGaussianNoise) {
  DatasetOptions o = Opts(DataTask::kDenoise);
  o.noise_sigma = 0.2;
  auto ds = Open(o);
  auto ex = ds->Get(0, 3);
  ASSERT_TRUE(ex.ok());
  EXPECT_EQ(ex->input.sizes().vec(), (std::vector<int64_t>{3, 32, 32}));
  const torch::Tensor noise = ex->input - ex->target;
  EXPECT_NEAR(noise.std().item<double>(), 0.2, 0.02);
  EXPECT_NEAR(noise.mean().item<double>(), 0.0, 0.02);
  EXPECT_GE(ex->target.min().item<float>(), 0.0f);
  EXPECT_TRUE(torch::equal(ex->input, ds->Get(0, 3)->input));

  o.channels = 1;
  auto gray = Open(o)->Get(0, 3);
  ASSERT_TRUE(gray.ok());
  EXPECT_EQ(gray->input.size(0), 1);
}

TEST_F(DatasetTest, ClassifyAndGanPairs) {
  auto ds = Open(Opts(DataTask::kClassify));
  auto batch = ds->GetBatch({0, 1, 2, 9}, 0);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(batch->input.sizes().vec(), (std::vector<int64_t>{4, 3, 32, 32}));
  EXPECT_EQ(batch->target.scalar_type(), torch::kLong);
  EXPECT_EQ(batch->target.sizes().vec(), (std::vector<int64_t>{4}));
  EXPECT_EQ(batch->target[0].item<int64_t>(), 0);  // gradient
  EXPECT_EQ(batch->target[1].item<int64_t>(), 1);  // circles
  EXPECT_EQ(batch->target[3].item<int64_t>(), 3);  // the JPEG, "checker"
  EXPECT_EQ(batch->ids, (std::vector<int64_t>{0, 1, 2, 9}));

  auto gan = Open(Opts(DataTask::kGan))->Get(4, 0);
  ASSERT_TRUE(gan.ok());
  EXPECT_EQ(gan->input.size(0), 1);
  EXPECT_EQ(gan->target.size(0), 3);
  EXPECT_GE(gan->target.min().item<float>(), -1.0f);
  EXPECT_LT(gan->target.min().item<float>(), 0.0f);

  // A folder with a file whose name names no class cannot be classified.
  const std::string other = testing::TempDir() + "/tessera_dataset_unlabelled";
  fs::create_directories(other);
  ASSERT_TRUE(WritePng(other + "/photo.png", GenerateSampleImage(0, 8, 1)).ok());
  auto bad = ImageFolderDataset::Open(other, Opts(DataTask::kClassify));
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(DatasetTest, SmallImagesAreScaledUpAndCorruptOnesReportThePath) {
  const std::string dir = testing::TempDir() + "/tessera_dataset_small";
  fs::remove_all(dir);
  ASSERT_TRUE(GenerateSampleImages(dir, 2, 16, 1).ok());
  const std::string corrupt = dir + "/sample-00002-rings.png";
  std::ofstream(corrupt) << "\x89PNG garbage";
  auto ds = ImageFolderDataset::Open(dir, Opts(DataTask::kColorize));
  ASSERT_TRUE(ds.ok());
  auto small = (*ds)->Get(0, 0);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_EQ(small->input.sizes().vec(), (std::vector<int64_t>{1, 32, 32}));
  auto broken = (*ds)->Get(2, 0);
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(broken.status().message().find(corrupt), std::string::npos);
  EXPECT_FALSE((*ds)->Get(3, 0).ok()) << "id out of range";
}

// A batch prepared by several threads is the batch one thread prepares, whatever
// the number of threads (more than the batch's images included), and a failing
// batch reports its first bad image in batch order.
TEST_F(DatasetTest, ABatchDoesNotDependOnItsLoaderThreads) {
  for (DataTask task : {DataTask::kColorize, DataTask::kDenoise, DataTask::kGan}) {
    auto ds = Open(Opts(task));
    const std::vector<int64_t> ids = {7, 0, 9, 3, 3, 5, 1};
    auto one = ds->GetBatch(ids, 2, 1);
    ASSERT_TRUE(one.ok()) << one.status().ToString();
    for (int threads : {2, 3, 7, 64}) {
      auto many = ds->GetBatch(ids, 2, threads);
      ASSERT_TRUE(many.ok()) << many.status().ToString();
      EXPECT_TRUE(torch::equal(many->input, one->input)) << threads << " threads";
      EXPECT_TRUE(torch::equal(many->target, one->target)) << threads << " threads";
      EXPECT_EQ(many->ids, ids);
    }
  }

  const std::string bad_dir = dir_ + "-bad";
  fs::remove_all(bad_dir);
  ASSERT_TRUE(GenerateSampleImages(bad_dir, 4, 40, 3).ok());
  auto bad = ImageFolderDataset::Open(bad_dir, Opts(DataTask::kColorize));
  ASSERT_TRUE(bad.ok()) << bad.status().ToString();
  ASSERT_EQ((*bad)->size(), 4);
  for (int64_t id : {1, 3}) std::ofstream((*bad)->path(id), std::ios::trunc) << "not a png";
  for (int threads : {1, 2, 4}) {
    auto batch = (*bad)->GetBatch({0, 3, 2, 1}, 0, threads);
    ASSERT_FALSE(batch.ok()) << threads << " threads";
    EXPECT_NE(batch.status().message().find((*bad)->path(3)), std::string::npos)
        << threads << " threads: " << batch.status().ToString();
  }
  fs::remove_all(bad_dir);
}

// Colorize pairs made straight from the 8-bit pixels are bit-equal to the tensor
// path's (ImageToTensor, crop, flip, Lab), for RGB, JPEG and gray images, random and
// centred crops, over several epochs; an image smaller than the crop goes the tensor
// path (scaled up) either way.
TEST_F(DatasetTest, DirectColorizePairsEqualTheTensorPath) {
  const std::string gray_dir = dir_ + "-gray";
  fs::remove_all(gray_dir);
  fs::create_directories(gray_dir);
  Image gray = MakeImage(37, 45, 1);
  for (size_t i = 0; i < gray.pixels.size(); ++i) gray.pixels[i] = static_cast<uint8_t>(i * 7);
  ASSERT_TRUE(WritePng(gray_dir + "/gray.png", gray).ok());
  Image small = MakeImage(20, 24, 3);
  for (size_t i = 0; i < small.pixels.size(); ++i) small.pixels[i] = static_cast<uint8_t>(i * 13);
  ASSERT_TRUE(WritePng(gray_dir + "/small.png", small).ok());
  for (const std::string& dir : {dir_, gray_dir}) {
    for (bool augment : {true, false}) {
      DatasetOptions direct = Opts(DataTask::kColorize);
      direct.augment = augment;
      DatasetOptions tensor = direct;
      tensor.direct_colorize = false;
      auto a = ImageFolderDataset::Open(dir, direct);
      auto b = ImageFolderDataset::Open(dir, tensor);
      ASSERT_TRUE(a.ok() && b.ok());
      for (int64_t epoch : {0, 1, 5}) {
        for (int64_t id = 0; id < (*a)->size(); ++id) {
          auto x = (*a)->Get(id, epoch);
          auto y = (*b)->Get(id, epoch);
          ASSERT_TRUE(x.ok() && y.ok()) << (*a)->path(id);
          EXPECT_TRUE(torch::equal(x->input, y->input)) << (*a)->path(id) << " epoch " << epoch;
          EXPECT_TRUE(torch::equal(x->target, y->target)) << (*a)->path(id) << " epoch " << epoch;
        }
      }
    }
  }
  fs::remove_all(gray_dir);
}

TEST_F(DatasetTest, LoaderDeliversThisRanksShardsInOrder) {
  auto ds = Open(Opts(DataTask::kColorize));
  const std::vector<int64_t> shares = {3, 1};
  const auto perm = EpochPermutation(4, 0, ds->size());
  std::vector<std::vector<int64_t>> batches;
  const int64_t steps = *StepsPerEpoch(ds->size(), shares);
  for (int64_t s = 0; s < steps; ++s) {
    auto ids = ShardForRank(perm, s, shares, 0);
    ASSERT_TRUE(ids.ok());
    if (!ids->empty()) batches.push_back(*ids);
  }
  auto loader = MakeBatchLoader(ds, batches, 0, 2, 2);
  for (const auto& want : batches) {
    auto got = loader->Next();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE(got->has_value());
    EXPECT_EQ((*got)->ids, want);
    EXPECT_EQ((*got)->input.size(0), static_cast<int64_t>(want.size()));
    EXPECT_TRUE(torch::equal((*got)->input, ds->GetBatch(want, 0)->input));
  }
  auto end = loader->Next();
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
}

}  // namespace
}  // namespace tessera::worker
