#include "worker/data/color.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace tessera::worker {
namespace {

// D65 reference white, Y = 1.
constexpr double kXn = 0.95047;
constexpr double kYn = 1.0;
constexpr double kZn = 1.08883;
constexpr double kEpsilon = 216.0 / 24389.0;  // (6/29)^3
constexpr double kKappa = 24389.0 / 27.0;     // (29/3)^3

double SrgbToLinearExact(double c) {
  return c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4);
}

// Decoded 8-bit images give only 256 values per channel: level / 255 as a float,
// rounded either as a division or as a multiplication by 1/255 (vectorised
// code). A value equal to one of those keys takes its precomputed linear value,
// the same double SrgbToLinearExact returns for it; any other value (a resized
// or scaled image) is computed.
struct LevelTable {
  std::array<float, 256> divided, multiplied;
  std::array<double, 256> linear_divided, linear_multiplied;
  LevelTable() {
    for (int k = 0; k < 256; ++k) {
      divided[k] = static_cast<float>(k) / 255.0f;
      multiplied[k] = static_cast<float>(k) * (1.0f / 255.0f);
      linear_divided[k] = SrgbToLinearExact(divided[k]);
      linear_multiplied[k] = SrgbToLinearExact(multiplied[k]);
    }
  }
};

double LinearToSrgb(double c) {
  return c <= 0.0031308 ? 12.92 * c : 1.055 * std::pow(c, 1.0 / 2.4) - 0.055;
}
double F(double t) { return t > kEpsilon ? std::cbrt(t) : (kKappa * t + 16.0) / 116.0; }
double FInverse(double f) {
  const double f3 = f * f * f;
  return f3 > kEpsilon ? f3 : (116.0 * f - 16.0) / kKappa;
}

}  // namespace

double SrgbToLinear(float c) {
  static const LevelTable table;
  if (c >= 0.0f && c <= 1.0f) {
    const auto k = static_cast<size_t>(std::lround(c * 255.0f));
    if (c == table.divided[k]) return table.linear_divided[k];
    if (c == table.multiplied[k]) return table.linear_multiplied[k];
  }
  return SrgbToLinearExact(c);
}

Lab RgbToLab(const Rgb& rgb) {
  return LinearRgbToLab(SrgbToLinear(rgb.r), SrgbToLinear(rgb.g), SrgbToLinear(rgb.b));
}

Lab LinearRgbToLab(double r, double g, double b) {
  const double x = 0.4124564 * r + 0.3575761 * g + 0.1804375 * b;
  const double y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b;
  const double z = 0.0193339 * r + 0.1191920 * g + 0.9503041 * b;
  const double fx = F(x / kXn), fy = F(y / kYn), fz = F(z / kZn);
  return Lab{static_cast<float>(116.0 * fy - 16.0), static_cast<float>(500.0 * (fx - fy)),
             static_cast<float>(200.0 * (fy - fz))};
}

Rgb LabToRgb(const Lab& lab) {
  const double fy = (lab.l + 16.0) / 116.0;
  const double fx = fy + lab.a / 500.0;
  const double fz = fy - lab.b / 200.0;
  const double x = kXn * FInverse(fx), y = kYn * FInverse(fy), z = kZn * FInverse(fz);
  const double r = 3.2404542 * x - 1.5371385 * y - 0.4985314 * z;
  const double g = -0.9692660 * x + 1.8760108 * y + 0.0415560 * z;
  const double b = 0.0556434 * x - 0.2040259 * y + 1.0572252 * z;
  auto encode = [](double c) {
    return static_cast<float>(std::clamp(LinearToSrgb(std::clamp(c, 0.0, 1.0)), 0.0, 1.0));
  };
  return Rgb{encode(r), encode(g), encode(b)};
}

float RgbToGray(const Rgb& rgb) { return 0.299f * rgb.r + 0.587f * rgb.g + 0.114f * rgb.b; }

}  // namespace tessera::worker
