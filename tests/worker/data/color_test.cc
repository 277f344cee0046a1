#include "worker/data/color.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

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

// The test's own sRGB -> Lab in double precision (IEC 61966-2-1, D65, CIE 1976).
Lab ReferenceLab(float rf, float gf, float bf) {
  auto linear = [](double c) {
    return c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4);
  };
  auto f = [](double t) {
    return t > 216.0 / 24389.0 ? std::cbrt(t) : (24389.0 / 27.0 * t + 16.0) / 116.0;
  };
  const double r = linear(rf), g = linear(gf), b = linear(bf);
  const double x = 0.4124564 * r + 0.3575761 * g + 0.1804375 * b;
  const double y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b;
  const double z = 0.0193339 * r + 0.1191920 * g + 0.9503041 * b;
  const double fx = f(x / 0.95047), fy = f(y), fz = f(z / 1.08883);
  return Lab{static_cast<float>(116.0 * fy - 16.0), static_cast<float>(500.0 * (fx - fy)),
             static_cast<float>(200.0 * (fy - fz))};
}

// Decoded images' values (level / 255, divided or multiplied by 1/255) and values
// between levels (a resized image's) convert exactly as the formula does.
TEST(ColorTest, EveryEightBitLevelAndTheValuesBetweenConvertExactly) {
  for (int k = 0; k < 256; ++k) {
    const std::vector<float> values = {static_cast<float>(k) / 255.0f,
                                       static_cast<float>(k) * (1.0f / 255.0f),
                                       std::nextafter(static_cast<float>(k) / 255.0f, 2.0f),
                                       (static_cast<float>(k) + 0.5f) / 255.0f};
    for (float v : values) {
      const float other = static_cast<float>(255 - k) / 255.0f;
      const Lab got = RgbToLab(Rgb{v, other, v});
      const Lab want = ReferenceLab(v, other, v);
      EXPECT_EQ(got.l, want.l) << "level " << k << " value " << v;
      EXPECT_EQ(got.a, want.a) << "level " << k << " value " << v;
      EXPECT_EQ(got.b, want.b) << "level " << k << " value " << v;
    }
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
