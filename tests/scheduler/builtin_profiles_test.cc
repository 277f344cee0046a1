#include "scheduler/builtin_profiles.h"

#include <gtest/gtest.h>

#include <string>

#include "scheduler/planner.h"
#include "tests/scheduler/builders.h"

namespace tessera::scheduler::testing {
namespace {

class BuiltinProfileTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BuiltinProfileTest, IsValidEstimatedAndPlannable) {
  auto profile = BuiltinProfile("builtin:" + GetParam());
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  EXPECT_EQ(profile->name, GetParam());
  EXPECT_TRUE(profile->Validate().ok());
  EXPECT_TRUE(profile->estimated);
  EXPECT_EQ(profile->nominal_image_px, 256);
  EXPECT_GE(profile->layers.size(), 8u);
  double flops = 0;
  int64_t params = 0;
  for (const Layer& l : profile->layers) {
    EXPECT_GT(l.forward_flops, 0) << l.name;
    EXPECT_GT(l.output_bytes, 0) << l.name;
    flops += l.forward_flops;
    params += l.parameter_bytes;
  }
  // Sanity ranges for 256 x 256 image models: 1-200 GFLOPs, 0.5-500 MB of fp32 weights.
  EXPECT_GT(flops, 1e9);
  EXPECT_LT(flops, 2e11);
  EXPECT_GT(params, 500'000);
  EXPECT_LT(params, 500'000'000);

  auto plans =
      MakePlans(ClusterBuilder().Node("a").Gpus(2, "A100", 80, 19.5).Gpu("T4", 16, 8).Build(),
                *profile, Train(32));
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  EXPECT_FALSE(plans->plans.empty());
}

INSTANTIATE_TEST_SUITE_P(All, BuiltinProfileTest, ::testing::ValuesIn(BuiltinProfileNames()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

TEST(BuiltinProfilesTest, UnknownNameIsNotFound) {
  auto p = BuiltinProfile("builtin:bert");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
}

TEST(BuiltinProfilesTest, UnetBoundariesCarryPendingSkips) {
  auto p = BuiltinProfile("colorize-unet");
  ASSERT_TRUE(p.ok());
  // enc1b's boundary carries its own output plus the skip kept for dec1.
  const Layer& enc1b = p->layers[1];
  EXPECT_EQ(enc1b.name, "enc1b");
  EXPECT_EQ(enc1b.output_bytes, 2 * 256 * 256 * 64 * 4);
  // The bottleneck's boundary still carries all four skips.
  for (const Layer& l : p->layers) {
    if (l.name == "bottleneck_b") {
      EXPECT_GT(l.output_bytes, 256 * 256 * 64 * 4);
    }
  }
}

}  // namespace
}  // namespace tessera::scheduler::testing
