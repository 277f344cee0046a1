// Colour conversion: sRGB <-> CIE L*a*b* (D65 white, 2 degree observer) and
// grayscale, plus the normalisation "colorize-unet" uses.
//
// RGB values are gamma-encoded sRGB in [0, 1]. Lab: L in [0, 100], a and b
// roughly in [-128, 127]. Conversion: sRGB -> linear (IEC 61966-2-1) ->
// XYZ (sRGB matrix, D65) -> Lab (CIE 1976). LabToRgb inverts it and clamps
// to [0, 1] (colours outside the sRGB gamut are clipped).
//
// Model normalisation (colorize-unet input / target):
//   l_norm  = L / 50 - 1        (in [-1, 1])
//   ab_norm = ab / 110          (about [-1.16, 1.15]; sRGB's gamut reaches
//                                |a|, |b| <= 110 for nearly all colours)
// Thread safety: pure functions.
#ifndef TESSERA_WORKER_DATA_COLOR_H_
#define TESSERA_WORKER_DATA_COLOR_H_

namespace tessera::worker {

struct Rgb {
  float r = 0, g = 0, b = 0;
};
struct Lab {
  float l = 0, a = 0, b = 0;
};

Lab RgbToLab(const Rgb& rgb);
// The two halves of RgbToLab (RgbToLab(c) == LinearRgbToLab of SrgbToLinear of
// each channel, bit for bit), for callers that convert many pixels of 8-bit
// levels through a table of SrgbToLinear.
double SrgbToLinear(float c);
Lab LinearRgbToLab(double r, double g, double b);
Rgb LabToRgb(const Lab& lab);

// Rec. 601 luma of gamma-encoded sRGB, in [0, 1].
float RgbToGray(const Rgb& rgb);

inline constexpr float kLScale = 50.0f;
inline constexpr float kAbScale = 110.0f;
inline float NormalizeL(float l) { return l / kLScale - 1.0f; }
inline float DenormalizeL(float l_norm) { return (l_norm + 1.0f) * kLScale; }
inline float NormalizeAb(float ab) { return ab / kAbScale; }
inline float DenormalizeAb(float ab_norm) { return ab_norm * kAbScale; }

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_DATA_COLOR_H_
