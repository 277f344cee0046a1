// The colorizer learns from generated images: the loss falls over a few
// optimizer steps (data pipeline + model + loss end to end, small sizes).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <numeric>
#include <vector>

#include "worker/data/image_folder_dataset.h"
#include "worker/data/sample_images.h"
#include "worker/model/layered_model.h"

namespace tessera::worker {
namespace {

TEST(ColorizerTrainingTest, LossDecreasesOnGeneratedImages) {
  const std::string dir = testing::TempDir() + "/tessera_colorize_train";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(GenerateSampleImages(dir, 12, 32, 5).ok());
  DatasetOptions opts;
  opts.task = DataTask::kColorize;
  opts.image_size = 32;
  opts.augment = false;
  auto ds = ImageFolderDataset::Open(dir, opts);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  std::vector<int64_t> ids((*ds)->size());
  std::iota(ids.begin(), ids.end(), 0);
  auto batch = (*ds)->GetBatch(ids, 0);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  // The targets carry colour: a constant (grey) prediction is not already perfect.
  ASSERT_GT(batch->target.abs().mean().item<double>(), 0.05);

  ModelConfig cfg;
  cfg.width = 8;
  cfg.image_size = 32;
  cfg.seed = 3;
  auto model = MakeModel("colorize-unet", cfg);
  ASSERT_TRUE(model.ok());
  LayeredModel& m = **model;
  m.SetTraining(true);
  std::vector<torch::Tensor> params;
  for (const auto& [n, p] : m.NamedParameters(0, m.num_layers())) params.push_back(p);
  torch::optim::Adam opt(params, torch::optim::AdamOptions(3e-3));
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    opt.zero_grad();
    Activation out = m.Forward({batch->input, {}}, 0, m.num_layers());
    torch::Tensor loss = m.Loss(out, batch->target);
    loss.backward();
    opt.step();
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
  }
  EXPECT_LT(last, 0.7 * first) << "first " << first << " last " << last;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera::worker
