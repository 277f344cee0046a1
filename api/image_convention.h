// ImageConvention: how an exported image model (a `model:` entrypoint: a
// TorchScript file or an AOTInductor package) takes and gives images. The
// infer job's spec states it ("image" in docs/rest-api.md); what the spec
// leaves unset comes from the module itself (its `tessera.json`, see
// worker/runtime/exported_model.h) and, failing that, from probe forwards of
// the worker.
//
//   input     "rgb"    3 channels R, G, B, each mapped to `range`
//             "gray"   1 channel, the Rec. 601 luma of the image, mapped to `range`
//             "l"      1 channel, CIELAB lightness L/50 - 1 (in [-1, 1])
//   output    "rgb"    3 channels in `range`, written as an RGB PNG
//             "gray"   1 channel in `range`, a gray PNG
//             "ab"     2 channels, CIELAB a/110 and b/110, joined with the
//                      input's L into an RGB PNG (an L -> ab colorizer)
//             "scores" [K] logits per image: a JSON file with the softmax
//   range     [lo, hi]: the value of black and of white in rgb/gray tensors
//             (e.g. [0, 1], [-1, 1], [0, 255]); unset: [0, 1]
//   align_px  the sides the module needs to be multiples of (a U-Net with
//             four 2x downsamplings: 16); 0: probed
//   halo_px   the context a tile needs around the part it owns (the
//             receptive field's radius); -1: probed
// A gray image through an "rgb" input is expanded to three equal channels;
// an "rgb" output of a gray source image stays RGB (a colorizer's output).
//
// Thread safety: values and pure functions.
#ifndef TESSERA_API_IMAGE_CONVENTION_H_
#define TESSERA_API_IMAGE_CONVENTION_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tessera::api {

struct ImageConvention {
  std::string input;   // "" (from the module or probed) | "rgb" | "gray" | "l"
  std::string output;  // "" | "rgb" | "gray" | "ab" | "scores"
  std::optional<std::pair<double, double>> range;  // unset: [0, 1]
  int64_t align_px = 0;                            // 0: probed
  int64_t halo_px = -1;                            // -1: probed

  // True when nothing is stated.
  bool empty() const;
  friend bool operator==(const ImageConvention&, const ImageConvention&) = default;
};

inline constexpr int64_t kMaxAlignPx = 1024;
inline constexpr int64_t kMaxHaloPx = 4096;

// The stated members only ({} when empty()).
nlohmann::json ToJson(const ImageConvention& c);
// Shape and values; errors are kInvalidArgument naming "<prefix>.<member>"
// (prefix "image" in a job spec, "" in a module's tessera.json).
Result<ImageConvention> ImageConventionFromJson(const nlohmann::json& j, const std::string& prefix);
// Values only: input and output among the names above, range finite with
// lo < hi and |lo|, |hi| <= 1e6, align_px 0..1024, halo_px -1..4096.
Status ValidateImageConvention(const ImageConvention& c, const std::string& prefix);

// `stated` where it states a member, else `fallback`'s.
ImageConvention Overlay(const ImageConvention& stated, const ImageConvention& fallback);

// The worker's flags for the stated members (`tessera-worker infer
// --image-input ... --image-output ... --value-range lo,hi --align-px N
// --halo-px N`), in that order.
std::vector<std::string> ImageConventionArgs(const ImageConvention& c);
// "lo,hi" -> range; kInvalidArgument naming `field` otherwise.
Result<std::pair<double, double>> ParseValueRange(const std::string& text,
                                                  const std::string& field);

}  // namespace tessera::api

#endif  // TESSERA_API_IMAGE_CONVENTION_H_
