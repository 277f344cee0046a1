#include "worker/runtime/loss_scaler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace tessera::worker {
namespace {

// Parameters whose gradients hold `bad` at one element of parameter `bad_param`
// (-1: all finite); parameter 1 has no gradient.
NamedTensors Params(int bad_param, float bad) {
  torch::manual_seed(3);
  NamedTensors params;
  for (int i = 0; i < 4; ++i) {
    torch::Tensor p = torch::randn({5, 3});
    if (i != 1) {
      p.mutable_grad() = torch::randn({5, 3}) * 1000;
      if (i == bad_param) p.mutable_grad()[2][1] = bad;
    }
    params.emplace_back("p" + std::to_string(i), p);
  }
  return params;
}

// The per-parameter check the scaler made before: one host sync per parameter.
bool ReferenceFinite(const NamedTensors& params, double factor) {
  bool finite = true;
  for (const auto& [n, p] : params) {
    if (!p.grad().defined()) continue;
    p.mutable_grad().mul_(factor);
    if (!torch::isfinite(p.grad()).all().item<bool>()) finite = false;
  }
  return finite;
}

TEST(LossScalerTest, OneFlagEqualsThePerParameterCheck) {
  const float kNan = std::numeric_limits<float>::quiet_NaN();
  const float kInf = std::numeric_limits<float>::infinity();
  struct Case {
    int bad_param;
    float bad;
  } cases[] = {{-1, 0}, {0, kNan}, {3, kInf}, {2, -kInf}, {1, kNan} /* no gradient there */};
  for (const Case& c : cases) {
    NamedTensors fused = Params(c.bad_param, c.bad);
    NamedTensors reference = Params(c.bad_param, c.bad);
    const bool finite = ReferenceFinite(reference, 1.0 / 1024);
    torch::Tensor flag = UnscaleAndFlagNonFinite(fused, 1.0 / 1024);
    ASSERT_TRUE(flag.defined());
    EXPECT_EQ(flag.numel(), 1);
    EXPECT_EQ(flag.scalar_type(), torch::kFloat64);
    EXPECT_EQ(flag.item<double>(), finite ? 0.0 : 1.0) << c.bad_param;
    for (size_t i = 0; i < fused.size(); ++i) {
      const torch::Tensor a = fused[i].second.grad(), b = reference[i].second.grad();
      ASSERT_EQ(a.defined(), b.defined());
      if (a.defined()) {
        EXPECT_TRUE(torch::equal(a.nan_to_num(), b.nan_to_num())) << i;
      }
    }
  }
  NamedTensors none = {{"x", torch::ones({2})}};
  EXPECT_FALSE(UnscaleAndFlagNonFinite(none, 0.5).defined()) << "no gradient: no flag";
}

TEST(LossScalerTest, SkipsAndHalvesOnOverflowDoublesAfterGoodSteps) {
  auto world = MakeLocalWorld();
  LossScaler scaler;
  EXPECT_EQ(scaler.scale(), 65536.0);
  NamedTensors good = Params(-1, 0);
  const torch::Tensor before = good[0].second.grad().clone();
  auto ok = scaler.UnscaleAndCheck(good, world->world(), torch::Device(torch::kCPU));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(*ok);
  EXPECT_TRUE(torch::allclose(good[0].second.grad(), before / 65536.0));
  auto skip = scaler.UnscaleAndCheck(Params(2, std::numeric_limits<float>::infinity()),
                                     world->world(), torch::Device(torch::kCPU));
  ASSERT_TRUE(skip.ok());
  EXPECT_FALSE(*skip);
  EXPECT_EQ(scaler.scale(), 32768.0);
  for (int i = 0; i < 2000; ++i) {
    NamedTensors p = {{"w", torch::ones({1})}};
    p[0].second.mutable_grad() = torch::ones({1});
    ASSERT_TRUE(*scaler.UnscaleAndCheck(p, world->world(), torch::Device(torch::kCPU)));
  }
  EXPECT_EQ(scaler.scale(), 65536.0);
}

}  // namespace
}  // namespace tessera::worker
