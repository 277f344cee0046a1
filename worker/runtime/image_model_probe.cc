#include "worker/runtime/image_model_probe.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "worker/runtime/device_memory.h"

namespace tessera::worker {
namespace {

constexpr char kModelField[] = "model-file";
constexpr int64_t kSide = 128;

int64_t RoundUp(int64_t v, int64_t align) { return (v + align - 1) / align * align; }

std::string Shape(const torch::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

int64_t ChannelsOf(const std::string& input) { return input == "rgb" ? 3 : 1; }

// A random image in [lo, hi] (fixed seed: the probe is repeatable).
torch::Tensor RandomInput(int64_t channels, int64_t h, int64_t w,
                          const std::pair<double, double>& range, uint64_t seed) {
  torch::Generator gen = at::detail::createCPUGenerator(seed);
  return torch::rand({1, channels, h, w}, gen) * (range.second - range.first) + range.first;
}

// Out of memory passes through; any other failure is "the module does not run
// on this input".
bool IsOom(const Status& s) { return s.code() == StatusCode::kResourceExhausted; }

// The channel kind of an image output.
std::string OutputKind(int64_t channels) {
  return channels == 3 ? "rgb" : channels == 2 ? "ab" : channels == 1 ? "gray" : "";
}

Status CheckStatedOutput(const std::string& stated, const std::string& found,
                         const torch::Tensor& out) {
  if (stated.empty() || stated == found) return Status::Ok();
  return InvalidArgument("is \"" + stated + "\" but the module gives " + Shape(out) + " (" +
                             (found.empty() ? std::string("neither an image nor scores") : found) +
                             ")",
                         "image.output");
}

// Step 3: the least alignment for which a side of kSide + a keeps its size.
Result<int64_t> ProbeAlign(const HostForward& forward, int64_t channels,
                           const std::pair<double, double>& range) {
  std::string last;
  for (int64_t a = 1; a <= 128; a *= 2) {
    const int64_t side = kSide + a;
    Result<torch::Tensor> out = forward(RandomInput(channels, side, side, range, 7));
    if (!out.ok()) {
      if (IsOom(out.status())) return out.status();
      last = out.status().message();
      continue;
    }
    if (out->dim() == 4 && out->size(2) == side && out->size(3) == side) return a;
    last = "a " + std::to_string(side) + "-pixel side gives " + Shape(*out);
  }
  return InvalidArgument(
      "the module keeps an image's size for no side of the form 128 + 2^k (" + last + ")",
      kModelField);
}

// Step 4: the radius over which one changed input pixel changes the output.
struct Halo {
  int64_t px = 0;
  bool bounded = true;
};
Result<Halo> ProbeHalo(const HostForward& forward, int64_t channels, int64_t align,
                       const std::pair<double, double>& range) {
  int64_t side = 0;
  for (int64_t base : {96, 192, 384}) {
    side = RoundUp(std::max(base, 4 * align), align);
    torch::Tensor a = RandomInput(channels, side, side, range, 11);
    torch::Tensor b = a.clone();
    const int64_t c = side / 2;
    // A large change (ten times the range), so that even a weak dependence
    // (a mean over the whole image) shows above float rounding.
    b.index({0, torch::indexing::Slice(), c, c}) += 10.0 * (range.second - range.first);
    TESSERA_ASSIGN_OR_RETURN(torch::Tensor out_a, forward(a));
    TESSERA_ASSIGN_OR_RETURN(torch::Tensor out_b, forward(b));
    const torch::Tensor diff = (out_a - out_b).abs().amax({0, 1});  // [H, W]
    const double scale = std::max(1e-12, out_a.abs().max().item<double>());
    const torch::Tensor changed = (diff > scale * 1e-6).nonzero();  // [N, 2]
    if (changed.size(0) == 0) return Halo{0, true};
    const int64_t radius = (changed - c).abs().max().item<int64_t>();
    if (radius < c - 1) return Halo{radius, true};
  }
  return Halo{side / 2, false};
}

// Step 5: device bytes a forward adds per input pixel.
Result<int64_t> ProbeBytesPerPixel(const HostForward& forward, int64_t channels, int64_t align,
                                   const std::pair<double, double>& range,
                                   const torch::Device& device) {
  if (PeakBytes(device) < 0) return int64_t{-1};
  int64_t peaks[2] = {0, 0};
  const int64_t sides[2] = {RoundUp(128, align), RoundUp(256, align)};
  for (int i = 0; i < 2; ++i) {
    const int64_t before = InUseBytes(device);
    ResetPeak(device);
    {
      Result<torch::Tensor> out = forward(RandomInput(channels, sides[i], sides[i], range, 13));
      if (!out.ok()) return out.status();
    }
    peaks[i] = PeakBytes(device) - before;
  }
  const double pixels = static_cast<double>(sides[1] * sides[1] - sides[0] * sides[0]);
  const double per_pixel = static_cast<double>(peaks[1] - peaks[0]) / pixels;
  // Never below what the input and a same-size output take.
  const double floor = static_cast<double>(sizeof(float)) * static_cast<double>(channels + 3);
  return static_cast<int64_t>(std::ceil(std::max(per_pixel, floor)));
}

}  // namespace

int64_t PixelBudget(int64_t free_bytes, int64_t bytes_per_pixel) {
  if (free_bytes < 0 || bytes_per_pixel <= 0) return -1;
  return static_cast<int64_t>(0.8 * static_cast<double>(free_bytes)) / bytes_per_pixel;
}

Result<ProbedImageModel> ProbeImageModel(const HostForward& forward,
                                         const api::ImageConvention& stated,
                                         const torch::Device& device, int64_t probe_side) {
  TESSERA_RETURN_IF_ERROR(api::ValidateImageConvention(stated, "image"));
  ProbedImageModel p;
  p.convention = stated;
  const std::pair<double, double> range = stated.range.value_or(std::make_pair(0.0, 1.0));
  p.convention.range = range;
  const int64_t side = RoundUp(probe_side, std::max<int64_t>(1, stated.align_px));

  // Step 1: channels in.
  std::vector<int64_t> candidates = stated.input.empty()
                                        ? std::vector<int64_t>{3, 1}
                                        : std::vector<int64_t>{ChannelsOf(stated.input)};
  torch::Tensor out;
  std::string tried;
  for (int64_t c : candidates) {
    Result<torch::Tensor> r = forward(RandomInput(c, side, side, range, 5));
    if (r.ok()) {
      p.input_channels = c;
      out = *r;
      break;
    }
    if (IsOom(r.status())) return r.status();
    tried += (tried.empty() ? "" : "; ") + std::string("[1, ") + std::to_string(c) + ", " +
             std::to_string(side) + ", " + std::to_string(side) + "]: " + r.status().message();
  }
  if (!out.defined()) {
    if (!stated.input.empty()) {
      return InvalidArgument("is \"" + stated.input + "\" but the module does not take " +
                                 std::to_string(ChannelsOf(stated.input)) + "-channel images (" +
                                 tried + ")",
                             "image.input");
    }
    return InvalidArgument("the module does not take images (" + tried + ")", kModelField);
  }

  // Step 2: what comes out.
  if (out.dim() == 2 && out.size(0) == 1) {
    TESSERA_RETURN_IF_ERROR(CheckStatedOutput(stated.output, "scores", out));
    p.convention.output = "scores";
    p.spatial = false;
  } else {
    const std::string kind = out.dim() == 4 ? OutputKind(out.size(1)) : "";
    TESSERA_RETURN_IF_ERROR(CheckStatedOutput(stated.output, kind, out));
    if (kind.empty()) {
      return InvalidArgument("the module gives " + Shape(out) + " for a " + std::to_string(side) +
                                 "-pixel image: Tessera writes images of 1 "
                                 "(gray), 2 (ab) or 3 (rgb) channels, or [1, K] scores",
                             kModelField);
    }
    if (out.size(2) != side || out.size(3) != side) {
      return InvalidArgument("shape mismatch: the module gives " + Shape(out) + " for a [1, " +
                                 std::to_string(p.input_channels) + ", " + std::to_string(side) +
                                 ", " + std::to_string(side) +
                                 "] image; an image model must keep the image's size",
                             kModelField);
    }
    p.convention.output = kind;
  }
  if (p.convention.input.empty()) {
    p.convention.input =
        p.input_channels == 3 ? "rgb" : (p.convention.output == "ab" ? "l" : "gray");
  }
  if (p.convention.output == "ab" && p.convention.input != "l") {
    return InvalidArgument("an ab output is joined with the input's L: the input must be \"l\"",
                           "image.input");
  }
  if (!p.spatial) {
    p.convention.align_px = 1;
    p.convention.halo_px = 0;
    return p;
  }

  // Steps 3 to 5.
  if (p.convention.align_px == 0) {
    TESSERA_ASSIGN_OR_RETURN(p.convention.align_px, ProbeAlign(forward, p.input_channels, range));
  }
  if (p.convention.halo_px < 0) {
    TESSERA_ASSIGN_OR_RETURN(Halo halo,
                             ProbeHalo(forward, p.input_channels, p.convention.align_px, range));
    p.convention.halo_px = halo.px;
    p.halo_bounded = halo.bounded;
  }
  TESSERA_ASSIGN_OR_RETURN(
      p.bytes_per_pixel,
      ProbeBytesPerPixel(forward, p.input_channels, p.convention.align_px, range, device));
  return p;
}

}  // namespace tessera::worker
