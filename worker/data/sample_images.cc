#include "worker/data/sample_images.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numbers>
#include <system_error>

#include "worker/data/color.h"
#include "worker/data/rng.h"

namespace tessera::worker {
namespace {

constexpr double kPi = std::numbers::pi;

Rgb Hsv(double h, double s, double v) {
  h = std::fmod(std::fmod(h, 1.0) + 1.0, 1.0) * 6.0;
  const int i = static_cast<int>(h);
  const double f = h - i, p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
  // (r, g, b) in each sixth of the hue circle.
  const std::array<std::array<double, 3>, 6> sextants = {
      {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}}};
  const auto& [r, g, b] = sextants[static_cast<size_t>(i % 6)];
  return Rgb{static_cast<float>(r), static_cast<float>(g), static_cast<float>(b)};
}

Rgb Mix(const Rgb& a, const Rgb& b, double t) {
  t = std::clamp(t, 0.0, 1.0);
  return Rgb{static_cast<float>(a.r + (b.r - a.r) * t), static_cast<float>(a.g + (b.g - a.g) * t),
             static_cast<float>(a.b + (b.b - a.b) * t)};
}

Rgb Scale(const Rgb& c, double k) {
  return Rgb{static_cast<float>(c.r * k), static_cast<float>(c.g * k), static_cast<float>(c.b * k)};
}

// Colour families per pattern: hue ranges give the structure -> colour link.
struct Palette {
  Rgb a, b, c;
};

Palette MakePalette(int pattern, Rng& rng) {
  auto jitter = [&](double h) { return h + rng.Uniform(-0.04, 0.04); };
  switch (pattern) {
    case 0:  // gradient: sky blue over green/brown ground
      return {Hsv(jitter(0.58), rng.Uniform(0.4, 0.7), rng.Uniform(0.8, 1.0)),
              Hsv(jitter(0.30), rng.Uniform(0.5, 0.8), rng.Uniform(0.4, 0.7)),
              Hsv(jitter(0.08), rng.Uniform(0.5, 0.8), rng.Uniform(0.3, 0.5))};
    case 1:  // circles: red/orange/yellow fruit on a dark green cloth
      return {Hsv(jitter(0.35), rng.Uniform(0.5, 0.8), rng.Uniform(0.2, 0.4)),
              Hsv(jitter(0.02), rng.Uniform(0.7, 1.0), rng.Uniform(0.7, 1.0)),
              Hsv(jitter(0.13), rng.Uniform(0.7, 1.0), rng.Uniform(0.8, 1.0))};
    case 2:  // stripes: purple and cream
      return {Hsv(jitter(0.78), rng.Uniform(0.5, 0.8), rng.Uniform(0.4, 0.7)),
              Hsv(jitter(0.12), rng.Uniform(0.1, 0.3), rng.Uniform(0.85, 1.0)), Rgb{}};
    case 3:  // checker: teal and terracotta
      return {Hsv(jitter(0.48), rng.Uniform(0.6, 0.9), rng.Uniform(0.4, 0.7)),
              Hsv(jitter(0.04), rng.Uniform(0.5, 0.8), rng.Uniform(0.6, 0.9)), Rgb{}};
    case 4:  // blobs: foliage greens to yellow
      return {Hsv(jitter(0.30), rng.Uniform(0.6, 0.9), rng.Uniform(0.2, 0.4)),
              Hsv(jitter(0.17), rng.Uniform(0.6, 0.9), rng.Uniform(0.8, 1.0)), Rgb{}};
    default:  // rings: magenta to blue
      return {Hsv(jitter(0.90), rng.Uniform(0.5, 0.9), rng.Uniform(0.6, 0.9)),
              Hsv(jitter(0.62), rng.Uniform(0.5, 0.9), rng.Uniform(0.3, 0.6)), Rgb{}};
  }
}

struct Disc {
  double cx, cy, r;
  bool yellow;
};

}  // namespace

const std::vector<std::string>& SamplePatternNames() {
  static const std::vector<std::string> names = {"gradient", "circles", "stripes",
                                                 "checker",  "blobs",   "rings"};
  return names;
}

int SamplePatternLabel(std::string_view file_name) {
  const size_t dot = file_name.rfind('.');
  std::string_view stem = file_name.substr(0, dot);
  const size_t dash = stem.rfind('-');
  if (dash == std::string_view::npos) return -1;
  stem = stem.substr(dash + 1);
  const auto& names = SamplePatternNames();
  for (size_t i = 0; i < names.size(); ++i) {
    if (stem == names[i]) return static_cast<int>(i);
  }
  return -1;
}

Image GenerateSampleImage(int pattern, int64_t size, uint64_t seed) {
  Rng rng(seed);
  const Palette pal = MakePalette(pattern, rng);
  Image img = MakeImage(size, size, 3);
  const double s = static_cast<double>(size);
  // Pattern parameters.
  const double horizon = rng.Uniform(0.35, 0.65);
  const double angle = rng.Uniform(0, kPi);
  const double period = rng.Uniform(0.12, 0.3);
  const double cell = rng.Uniform(0.1, 0.25);
  const double cx = rng.Uniform(0.2, 0.8), cy = rng.Uniform(0.2, 0.8);
  std::array<double, 8> wave{};
  for (double& w : wave) w = rng.Uniform(0, 2 * kPi);
  std::vector<Disc> discs(static_cast<size_t>(3 + rng.Below(4)));
  for (Disc& d : discs) {
    d = Disc{rng.Uniform(0.1, 0.9), rng.Uniform(0.1, 0.9), rng.Uniform(0.08, 0.2),
             rng.Uniform() < 0.5};
  }
  const double noise = 0.03;

  for (int64_t y = 0; y < size; ++y) {
    for (int64_t x = 0; x < size; ++x) {
      const double u = (static_cast<double>(x) + 0.5) / s, v = (static_cast<double>(y) + 0.5) / s;
      Rgb c;
      switch (pattern) {
        case 0: {
          c = v < horizon ? Mix(pal.a, Scale(pal.a, 0.75), 1.0 - v / horizon)
                          : Mix(pal.b, pal.c, (v - horizon) / (1.0 - horizon));
          break;
        }
        case 1: {
          c = Scale(pal.a, 0.8 + 0.2 * v);
          for (const Disc& d : discs) {
            const double dx = u - d.cx, dy = v - d.cy, r2 = dx * dx + dy * dy;
            if (r2 < d.r * d.r) {
              const double shade = 1.0 - 0.5 * std::sqrt(r2) / d.r;
              c = Scale(d.yellow ? pal.c : pal.b, shade);
            }
          }
          break;
        }
        case 2: {
          const double t = (u * std::cos(angle) + v * std::sin(angle)) / period;
          c = (static_cast<int64_t>(std::floor(t)) % 2 == 0) ? pal.a : pal.b;
          break;
        }
        case 3: {
          const auto ix = static_cast<int64_t>(u / cell), iy = static_cast<int64_t>(v / cell);
          c = ((ix + iy) % 2 == 0) ? pal.a : pal.b;
          break;
        }
        case 4: {
          double f = 0;
          for (int k = 0; k < 4; ++k) {
            f += std::sin((k + 2) * 3.1 * u + wave[k]) * std::cos((k + 1) * 2.7 * v + wave[k + 4]);
          }
          c = Mix(pal.a, pal.b, 0.5 + 0.3 * f);
          break;
        }
        default: {
          const double r = std::hypot(u - cx, v - cy);
          c = Mix(pal.a, pal.b, 0.5 + 0.5 * std::sin(r / period * 2 * kPi + wave[0]));
          break;
        }
      }
      const double n = noise * rng.Normal();
      img.at(y, x, 0) = static_cast<uint8_t>(std::lround(std::clamp(c.r + n, 0.0, 1.0) * 255));
      img.at(y, x, 1) = static_cast<uint8_t>(std::lround(std::clamp(c.g + n, 0.0, 1.0) * 255));
      img.at(y, x, 2) = static_cast<uint8_t>(std::lround(std::clamp(c.b + n, 0.0, 1.0) * 255));
    }
  }
  return img;
}

Result<std::vector<std::string>> GenerateSampleImages(const std::string& dir, int64_t count,
                                                      int64_t size, uint64_t seed) {
  if (count < 0) return InvalidArgument("count must not be negative", "count");
  if (size < 4) return InvalidArgument("size must be at least 4", "size");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Internal("cannot create " + dir + ": " + ec.message());
  const auto& names = SamplePatternNames();
  std::vector<std::string> paths;
  for (int64_t i = 0; i < count; ++i) {
    const int pattern = static_cast<int>(i % static_cast<int64_t>(names.size()));
    char file[64];
    std::snprintf(file, sizeof(file), "sample-%05lld-%s.png", static_cast<long long>(i),
                  names[static_cast<size_t>(pattern)].c_str());
    const std::string path = (std::filesystem::path(dir) / file).string();
    TESSERA_RETURN_IF_ERROR(WritePng(
        path, GenerateSampleImage(pattern, size, MixSeeds({seed, static_cast<uint64_t>(i)}))));
    paths.push_back(path);
  }
  return paths;
}

}  // namespace tessera::worker
