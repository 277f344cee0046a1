#include "worker/data/color.h"

#include <gtest/gtest.h>

namespace tessera::worker {
namespace {

struct Known {
  Rgb rgb;
  Lab lab;
};

// Reference values: sRGB (D65) -> CIE Lab, e.g. from Bruce Lindbloom's calculator.
TEST(ColorTest, RgbToLabMatchesKnownValues) {
  const Known cases[] = {
      {{1, 1, 1}, {100.0f, 0.0f, 0.0f}},
      {{0, 0, 0}, {0.0f, 0.0f, 0.0f}},
      {{1, 0, 0}, {53.2408f, 80.0925f, 67.2032f}},
      {{0, 1, 0}, {87.7347f, -86.1827f, 83.1793f}},
      {{0, 0, 1}, {32.2970f, 79.1875f, -107.8602f}},
      {{0.5f, 0.5f, 0.5f}, {53.3890f, 0.0f, 0.0f}},
      {{1, 1, 0}, {97.1393f, -21.5537f, 94.4780f}},
  };
  for (const Known& k : cases) {
    const Lab lab = RgbToLab(k.rgb);
    EXPECT_NEAR(lab.l, k.lab.l, 0.02) << k.rgb.r << "," << k.rgb.g << "," << k.rgb.b;
    EXPECT_NEAR(lab.a, k.lab.a, 0.02) << k.rgb.r << "," << k.rgb.g << "," << k.rgb.b;
    EXPECT_NEAR(lab.b, k.lab.b, 0.02) << k.rgb.r << "," << k.rgb.g << "," << k.rgb.b;
  }
}

TEST(ColorTest, LabRoundTripOverTheGamut) {
  for (int r = 0; r <= 10; ++r) {
    for (int g = 0; g <= 10; ++g) {
      for (int b = 0; b <= 10; ++b) {
        const Rgb in{r / 10.0f, g / 10.0f, b / 10.0f};
        const Rgb out = LabToRgb(RgbToLab(in));
        ASSERT_NEAR(out.r, in.r, 1e-4);
        ASSERT_NEAR(out.g, in.g, 1e-4);
        ASSERT_NEAR(out.b, in.b, 1e-4);
      }
    }
  }
}

TEST(ColorTest, OutOfGamutLabIsClampedAndGrayIsLuma) {
  const Rgb c = LabToRgb(Lab{50, 120, -120});
  for (float v : {c.r, c.g, c.b}) {
    EXPECT_GE(v, 0.0f);
    EXPECT_LE(v, 1.0f);
  }
  EXPECT_NEAR(RgbToGray({1, 0, 0}), 0.299f, 1e-6);
  EXPECT_NEAR(RgbToGray({0.2f, 0.2f, 0.2f}), 0.2f, 1e-6);
  EXPECT_NEAR(NormalizeL(100), 1.0f, 1e-6);
  EXPECT_NEAR(NormalizeL(0), -1.0f, 1e-6);
  EXPECT_NEAR(DenormalizeAb(NormalizeAb(-37.5f)), -37.5f, 1e-4);
}

}  // namespace
}  // namespace tessera::worker
