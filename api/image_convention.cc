#include "api/image_convention.h"

#include <cmath>
#include <cstdio>
#include <string_view>

#include "common/json_fields.h"

namespace tessera::api {
namespace {

constexpr std::string_view kInputs[] = {"rgb", "gray", "l"};
constexpr std::string_view kOutputs[] = {"rgb", "gray", "ab", "scores"};

template <size_t N>
bool OneOf(const std::string& v, const std::string_view (&names)[N]) {
  for (std::string_view n : names) {
    if (v == n) return true;
  }
  return false;
}

std::string Field(const std::string& prefix, std::string_view member) {
  return prefix.empty() ? std::string(member) : prefix + "." + std::string(member);
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

bool ImageConvention::empty() const { return *this == ImageConvention{}; }

nlohmann::json ToJson(const ImageConvention& c) {
  nlohmann::json j = nlohmann::json::object();
  if (!c.input.empty()) j["input"] = c.input;
  if (!c.output.empty()) j["output"] = c.output;
  if (c.range) j["range"] = {c.range->first, c.range->second};
  if (c.align_px != 0) j["align_px"] = c.align_px;
  if (c.halo_px != -1) j["halo_px"] = c.halo_px;
  return j;
}

Result<ImageConvention> ImageConventionFromJson(const nlohmann::json& j,
                                                const std::string& prefix) {
  ImageConvention c;
  JsonFields r(j, prefix);
  TESSERA_RETURN_IF_ERROR(r.CheckObject());
  TESSERA_RETURN_IF_ERROR(r.String("input", &c.input));
  TESSERA_RETURN_IF_ERROR(r.String("output", &c.output));
  TESSERA_ASSIGN_OR_RETURN(const nlohmann::json* range, r.Array("range"));
  if (range != nullptr) {
    if (range->size() != 2 || !(*range)[0].is_number() || !(*range)[1].is_number()) {
      return InvalidArgument("must be two numbers [black, white]", Field(prefix, "range"));
    }
    c.range = std::make_pair((*range)[0].get<double>(), (*range)[1].get<double>());
  }
  TESSERA_RETURN_IF_ERROR(r.Int("align_px", &c.align_px));
  TESSERA_RETURN_IF_ERROR(r.Int("halo_px", &c.halo_px));
  TESSERA_RETURN_IF_ERROR(r.NoUnknownFields());
  TESSERA_RETURN_IF_ERROR(ValidateImageConvention(c, prefix));
  return c;
}

Status ValidateImageConvention(const ImageConvention& c, const std::string& prefix) {
  if (!c.input.empty() && !OneOf(c.input, kInputs)) {
    return InvalidArgument("must be one of rgb, gray, l", Field(prefix, "input"));
  }
  if (!c.output.empty() && !OneOf(c.output, kOutputs)) {
    return InvalidArgument("must be one of rgb, gray, ab, scores", Field(prefix, "output"));
  }
  if (c.range) {
    const auto [lo, hi] = *c.range;
    if (!std::isfinite(lo) || !std::isfinite(hi) || std::fabs(lo) > 1e6 || std::fabs(hi) > 1e6) {
      return InvalidArgument("must be finite numbers within +-1e6", Field(prefix, "range"));
    }
    if (!(lo < hi)) {
      return InvalidArgument("black must be below white ([lo, hi] with lo < hi)",
                             Field(prefix, "range"));
    }
  }
  if (c.align_px < 0 || c.align_px > kMaxAlignPx) {
    return InvalidArgument("must be 0 (probed) or 1.." + std::to_string(kMaxAlignPx),
                           Field(prefix, "align_px"));
  }
  if (c.halo_px < -1 || c.halo_px > kMaxHaloPx) {
    return InvalidArgument("must be -1 (probed) or 0.." + std::to_string(kMaxHaloPx),
                           Field(prefix, "halo_px"));
  }
  return Status::Ok();
}

ImageConvention Overlay(const ImageConvention& stated, const ImageConvention& fallback) {
  ImageConvention c = fallback;
  if (!stated.input.empty()) c.input = stated.input;
  if (!stated.output.empty()) c.output = stated.output;
  if (stated.range) c.range = stated.range;
  if (stated.align_px != 0) c.align_px = stated.align_px;
  if (stated.halo_px != -1) c.halo_px = stated.halo_px;
  return c;
}

std::vector<std::string> ImageConventionArgs(const ImageConvention& c) {
  std::vector<std::string> args;
  if (!c.input.empty()) args.insert(args.end(), {"--image-input", c.input});
  if (!c.output.empty()) args.insert(args.end(), {"--image-output", c.output});
  if (c.range) {
    args.push_back("--value-range=" + Number(c.range->first) + "," + Number(c.range->second));
  }
  if (c.align_px != 0) args.insert(args.end(), {"--align-px", std::to_string(c.align_px)});
  if (c.halo_px != -1) args.insert(args.end(), {"--halo-px", std::to_string(c.halo_px)});
  return args;
}

Result<std::pair<double, double>> ParseValueRange(const std::string& text,
                                                  const std::string& field) {
  const size_t comma = text.find(',');
  if (comma == std::string::npos) {
    return InvalidArgument("must be \"black,white\", e.g. \"-1,1\"", field);
  }
  try {
    size_t used_lo = 0, used_hi = 0;
    const std::string lo_text = text.substr(0, comma), hi_text = text.substr(comma + 1);
    const double lo = std::stod(lo_text, &used_lo);
    const double hi = std::stod(hi_text, &used_hi);
    if (used_lo != lo_text.size() || used_hi != hi_text.size()) {
      return InvalidArgument("must be \"black,white\", e.g. \"-1,1\"", field);
    }
    ImageConvention c;
    c.range = std::make_pair(lo, hi);
    Status s = ValidateImageConvention(c, "");
    if (!s.ok()) return InvalidArgument(s.message(), field);
    return std::make_pair(lo, hi);
  } catch (const std::exception&) {
    return InvalidArgument("must be \"black,white\", e.g. \"-1,1\"", field);
  }
}

}  // namespace tessera::api
