#include "worker/model/profile.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "common/cpu_time.h"
#include "worker/model/layered_model.h"

namespace tessera::worker {
namespace {

std::shared_ptr<LayeredModel> SmallUnet() {
  ModelConfig c;
  c.width = 8;
  c.image_size = 32;
  auto m = MakeModel("colorize-unet", c);
  EXPECT_TRUE(m.ok());
  return *m;
}

TEST(ProfileModelTest, ReportsEveryLayerWithSizesFromTheModel) {
  auto model = SmallUnet();
  const auto buffers_before = model->NamedBuffers(0, model->num_layers());
  std::vector<torch::Tensor> saved;
  for (const auto& b : buffers_before) saved.push_back(b.second.clone());

  auto profile = ProfileModel(*model, 2, {1, 32, 32}, 2);
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  const nlohmann::json& j = *profile;
  EXPECT_EQ(j["model"], "colorize-unet");
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["batch"], 2);
  // Timed on the CPU clock an emulated device with this many threads uses.
  EXPECT_EQ(j["clock"], CpuClockName(CpuClockFor(torch::get_num_threads())));
  ASSERT_EQ(j["layers"].size(), model->num_layers());

  const int64_t f = 4;  // bytes per float
  for (size_t i = 0; i < model->num_layers(); ++i) {
    const auto& l = j["layers"][i];
    SCOPED_TRACE(l.dump());
    EXPECT_EQ(l["name"], model->layer(i).name);
    EXPECT_GE(l["fwd_ms"].get<double>(), 0.0);
    EXPECT_GE(l["bwd_ms"].get<double>(), 0.0);
    EXPECT_GT(l["fwd_flops"].get<double>(), 0.0);
    EXPECT_DOUBLE_EQ(l["fwd_flops"].get<double>(), 2 * l["fwd_flops_per_sample"].get<double>());
    int64_t params = 0;
    for (const auto& [n, t] : model->NamedParameters(i, i + 1)) params += t.numel() * f;
    EXPECT_EQ(l["param_bytes"].get<int64_t>(), params);
    // Everything the layer creates stays alive until backward: at least its output.
    EXPECT_GE(l["activation_bytes_per_sample"].get<int64_t>(),
              l["out_shape"][0].get<int64_t>() * l["out_shape"][1].get<int64_t>() *
                  l["out_shape"][2].get<int64_t>() * f);
  }
  // What crosses a cut includes the skip connections in carry.
  const auto& layers = j["layers"];
  EXPECT_EQ(layers[0]["output_bytes_per_sample"], 2 * 8 * 32 * 32 * f);  // main + its own skip
  EXPECT_EQ(layers[3]["name"], "down3");
  EXPECT_EQ(layers[3]["output_bytes_per_sample"],
            (64 * 4 * 4 + 8 * 32 * 32 + 16 * 16 * 16 + 32 * 8 * 8) * f);
  EXPECT_EQ(layers[7]["output_bytes_per_sample"], 2 * 32 * 32 * f);
  // The first conv of enc0: 2 * 1 * 8 * 9 * 32 * 32 FLOPs at least.
  EXPECT_GE(layers[0]["fwd_flops_per_sample"].get<double>(), 2.0 * 8 * 9 * 32 * 32);

  // The model is left as it was.
  const auto buffers_after = model->NamedBuffers(0, model->num_layers());
  for (size_t i = 0; i < saved.size(); ++i) {
    EXPECT_TRUE(torch::equal(saved[i], buffers_after[i].second)) << buffers_after[i].first;
  }
  for (const auto& [n, t] : model->NamedParameters(0, model->num_layers())) {
    EXPECT_FALSE(t.grad().defined()) << n;
  }
}

// A meter whose every timed call takes a set time and whose memory readings are
// scripted, as a GPU's meter reports them.
class ScriptedMeter : public ProfileMeter {
 public:
  torch::Device device() const override { return torch::Device(torch::kCPU); }
  std::string clock_name() const override { return "scripted"; }
  double Start() override {
    ++starts;
    return 100.0;
  }
  double ElapsedMs(double start) override {
    EXPECT_EQ(start, 100.0);
    // Forwards take 3 ms, backwards 5 ms (calls alternate).
    return (starts % 2 == 1) ? 3.0 : 5.0;
  }
  int64_t LiveBytes() override {
    // Before each forward: 1000; after it: 1000 + 64 per sample of the batch of 4.
    live = (live == 1000) ? 1000 + 4 * 64 : 1000;
    return live;
  }
  int64_t PeakBytes() override { return 1000 + 4 * 64 + 4 * 16; }
  void ResetPeak() override { ++resets; }
  int starts = 0, resets = 0;
  int64_t live = 0;
};

TEST(ProfileModelTest, AMeterTimesTheLayersAndCountsTheirMemory) {
  auto model = SmallUnet();
  ScriptedMeter meter;
  auto profile = ProfileModel(meter, *model, 4, {1, 32, 32}, 3);
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  const nlohmann::json& j = *profile;
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["clock"], "scripted");
  const auto n = static_cast<int>(model->num_layers());
  EXPECT_EQ(meter.starts, n * 4 * 2);  // a warm-up and 3 repeats, forward and backward
  EXPECT_EQ(meter.resets, n * 4);
  for (const auto& l : j["layers"]) {
    SCOPED_TRACE(l.dump());
    EXPECT_EQ(l["fwd_ms"].get<double>(), 3.0);
    EXPECT_EQ(l["bwd_ms"].get<double>(), 5.0);
    EXPECT_EQ(l["activation_bytes_per_sample"].get<int64_t>(), 64);
    EXPECT_EQ(l["backward_transient_bytes_per_sample"].get<int64_t>(), 16);
  }
  EXPECT_EQ(j["repeat_spread"].get<double>(), 0.0);
}

TEST(ProfileModelTest, RejectsBadArguments) {
  auto model = SmallUnet();
  struct Case {
    int64_t batch;
    std::vector<int64_t> shape;
    int repeats;
    std::string field;
  };
  for (const Case& c : {Case{0, {1, 32, 32}, 1, "batch"}, Case{1, {1, 32, 32}, 0, "repeats"},
                        Case{1, {}, 1, "in_shape"}, Case{1, {1, -3, 32}, 1, "in_shape"},
                        Case{1, {2, 32, 32}, 1, "in_shape"}}) {
    auto r = ProfileModel(*model, c.batch, c.shape, c.repeats);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().field(), c.field);
  }
}

nlohmann::json OneLayerProfile(int64_t batch, double fwd_ms, double bwd_ms) {
  return {{"model", "m"},
          {"batch", batch},
          {"layers", {{{"name", "a"}, {"fwd_ms", fwd_ms}, {"bwd_ms", bwd_ms}}}}};
}

TEST(ProfileModelTest, FixedCostsSplitTimeIntoPerCallAndPerSample) {
  struct Case {
    double fwd_small, bwd_small;  // at batch 4
    double fwd_big, bwd_big;      // at batch 16
    double fwd_fixed, bwd_fixed;  // expected per-call ms
  };
  for (const Case& c : {
           // fwd 1 ms per call + 0.5 ms per sample (3 ms at 4, 9 at 16); bwd 2 + 1 per sample.
           Case{3.0, 6.0, 9.0, 18.0, 1.0, 2.0},
           // Small batch cheaper than proportional: clamped to 0 per call.
           Case{1.0, 1.0, 8.0, 8.0, 0.0, 0.0},
           // All per call (time does not grow): fixed = the whole time.
           Case{2.0, 4.0, 2.0, 4.0, 2.0, 4.0},
       }) {
    auto fitted = WithFixedCosts(OneLayerProfile(16, c.fwd_big, c.bwd_big),
                                 {OneLayerProfile(4, c.fwd_small, c.bwd_small)});
    ASSERT_TRUE(fitted.ok()) << fitted.status().ToString();
    const nlohmann::json& layer = (*fitted)["layers"][0];
    EXPECT_NEAR(layer["fwd_fixed_ms"].get<double>(), c.fwd_fixed, 1e-12);
    EXPECT_NEAR(layer["bwd_fixed_ms"].get<double>(), c.bwd_fixed, 1e-12);
    EXPECT_DOUBLE_EQ(layer["fwd_ms"].get<double>(), c.fwd_big) << "batch times unchanged";
    EXPECT_EQ((*fitted)["fixed_batch"].get<int64_t>(), 4);
  }
}

TEST(ProfileModelTest, FixedCostsFitALineThroughEveryBatch) {
  struct Case {
    std::vector<std::pair<int64_t, double>> smaller;  // (batch, fwd ms); bwd = 2 x fwd
    double fwd_big;                                   // at batch 16
    double fwd_fixed;                                 // expected per-call ms
    int64_t fixed_batch;
  };
  for (const Case& c : {
           // On the line 1 + 0.5 b: the fit is exact.
           Case{{{1, 1.5}, {4, 3.0}}, 9.0, 1.0, 1},
           // The batch-1 point reads 0.6 ms high: the line through it and batch 16 alone
           // would put the whole error into the per-call cost (1.64); least squares
           // through (1, 2.1), (4, 3.0), (16, 9.0) spreads it: 1.4 + 0.4714 per sample.
           Case{{{1, 2.1}, {4, 3.0}}, 9.0, 1.4, 1},
           // Order of the smaller profiles does not matter.
           Case{{{4, 3.0}, {1, 2.1}}, 9.0, 1.4, 1},
       }) {
    std::vector<nlohmann::json> smaller;
    for (const auto& [b, ms] : c.smaller) smaller.push_back(OneLayerProfile(b, ms, 2 * ms));
    auto fitted = WithFixedCosts(OneLayerProfile(16, c.fwd_big, 2 * c.fwd_big), smaller);
    ASSERT_TRUE(fitted.ok()) << fitted.status().ToString();
    const nlohmann::json& layer = (*fitted)["layers"][0];
    EXPECT_NEAR(layer["fwd_fixed_ms"].get<double>(), c.fwd_fixed, 1e-9);
    EXPECT_NEAR(layer["bwd_fixed_ms"].get<double>(), 2 * c.fwd_fixed, 1e-9);
    EXPECT_EQ((*fitted)["fixed_batch"].get<int64_t>(), c.fixed_batch);
  }
}

TEST(ProfileModelTest, FixedCostBatchesAddOneBetweenWhenThereIsRoom) {
  struct Case {
    int64_t smallest, batch;
    std::vector<int64_t> want;
  };
  for (const Case& c : {Case{1, 16, {1, 4}}, Case{2, 8, {2, 4}}, Case{1, 2, {1}}, Case{3, 4, {3}},
                        Case{1, 4, {1, 2}}}) {
    EXPECT_EQ(FixedCostBatches(c.smallest, c.batch), c.want) << c.smallest << " " << c.batch;
  }
}

TEST(ProfileModelTest, FixedCostsNeedASmallerBatchOfTheSameLayers) {
  auto not_smaller = WithFixedCosts(OneLayerProfile(4, 1, 1), {OneLayerProfile(4, 1, 1)});
  ASSERT_FALSE(not_smaller.ok());
  EXPECT_EQ(not_smaller.status().field(), "fixed_batch");
  auto none = WithFixedCosts(OneLayerProfile(4, 1, 1), {});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().field(), "fixed_batch");
  nlohmann::json other = OneLayerProfile(2, 1, 1);
  other["layers"][0]["name"] = "b";
  auto different = WithFixedCosts(OneLayerProfile(4, 1, 1), {OneLayerProfile(3, 1, 1), other});
  ASSERT_FALSE(different.ok());
  EXPECT_EQ(different.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::worker
