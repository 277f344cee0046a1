#include "worker/runtime/tiling.h"

#include <algorithm>
#include <numeric>

#include "scheduler/tiling.h"

namespace tessera::worker {

int64_t UnetHaloPx(int64_t depth) {
  // Output pixel -> decoder double convs at levels 0..d-1 (2 x 2^k each) ->
  // bottom double conv at level d (2 x 2^d) -> encoder double convs at
  // levels d-1..0 (2 x 2^k each), plus up to 2^k - 1 pixels of pooling-cell
  // misalignment when moving from level k to k + 1: in all
  // 2(2^d - 1) + 2^(d+1) + 2(2^d - 1) + (2^d - 1) = 7 x 2^d - 5.
  return 7 * (int64_t{1} << depth);
}

Result<TileGeometry> TileGeometryForModel(const std::string& model_name) {
  if (model_name == "colorize-unet" || model_name == "gan-pix2pix") {
    return TileGeometry{.halo_px = UnetHaloPx(3), .align_px = 8};
  }
  if (model_name == "denoiser-dncnn") {
    // "in" + 8 middle layers + "out", each a 3x3 convolution with padding 1.
    return TileGeometry{.halo_px = 10, .align_px = 1};
  }
  if (model_name == "classifier-resnet") {
    return InvalidArgument("classifier-resnet ends in global pooling: images cannot be tiled",
                           "model");
  }
  return InvalidArgument("no tile geometry for model \"" + model_name + "\"", "model");
}

int64_t PadTo(int64_t length, int64_t align) {
  if (align <= 1) return length;
  return (length + align - 1) / align * align;
}

Result<TileSpec> EffectiveTileSpec(const TileSpec& requested, const TileGeometry& geometry) {
  const int64_t align = std::max<int64_t>(1, geometry.align_px);
  TileSpec out;
  out.tile_px = requested.tile_px / align * align;
  out.overlap_px = PadTo(std::max(requested.overlap_px, 2 * geometry.halo_px), align);
  if (out.tile_px - out.overlap_px < align) {
    return InvalidArgument(
        "tile side " + std::to_string(requested.tile_px) + " px leaves no room: the overlap is " +
            std::to_string(out.overlap_px) + " px (2 x halo " + std::to_string(geometry.halo_px) +
            ", aligned to " + std::to_string(align) + "); use at least " +
            std::to_string(out.overlap_px + align) + " px",
        "tile_px");
  }
  return out;
}

std::vector<Span> TileSpansAlong(int64_t length, int64_t tile, int64_t overlap) {
  std::vector<Span> out;
  if (tile >= length) {
    out.push_back({0, length});
    return out;
  }
  const int64_t n = scheduler::TilesAlong(static_cast<int>(length), static_cast<int>(tile),
                                          static_cast<int>(overlap));
  const int64_t stride = tile - overlap;
  for (int64_t i = 0; i + 1 < n; ++i) out.push_back({i * stride, i * stride + tile});
  out.push_back({length - tile, length});
  return out;
}

namespace {

// Owned spans: neighbours split their overlap at its middle.
std::vector<Span> OwnedSpans(const std::vector<Span>& spans) {
  std::vector<Span> own(spans.size());
  for (size_t i = 0; i < spans.size(); ++i) {
    own[i].begin = i == 0 ? spans[i].begin : own[i - 1].end;
    if (i + 1 == spans.size()) {
      own[i].end = spans[i].end;
    } else {
      // Overlap [next.begin, this.end): cut at its middle.
      own[i].end = (spans[i + 1].begin + spans[i].end) / 2;
    }
  }
  return own;
}

}  // namespace

TileGrid MakeTileGrid(int64_t height, int64_t width, const TileSpec& spec) {
  TileGrid g;
  g.height = height;
  g.width = width;
  g.overlap_px = spec.overlap_px;
  const std::vector<Span> ys = TileSpansAlong(height, spec.tile_px, spec.overlap_px);
  const std::vector<Span> xs = TileSpansAlong(width, spec.tile_px, spec.overlap_px);
  g.tile_px = std::min(spec.tile_px, std::max(height, width));
  const std::vector<Span> own_ys = OwnedSpans(ys);
  const std::vector<Span> own_xs = OwnedSpans(xs);
  g.rows = static_cast<int64_t>(ys.size());
  g.cols = static_cast<int64_t>(xs.size());
  for (size_t r = 0; r < ys.size(); ++r) {
    for (size_t c = 0; c < xs.size(); ++c) g.tiles.push_back({ys[r], xs[c], own_ys[r], own_xs[c]});
  }
  return g;
}

double TileWeight(const Tile& t, int64_t y, int64_t x) {
  return y >= t.own_y.begin && y < t.own_y.end && x >= t.own_x.begin && x < t.own_x.end ? 1.0 : 0.0;
}

std::vector<int64_t> ProportionalShares(int64_t n, const std::vector<int64_t>& weights) {
  const int64_t total = std::accumulate(weights.begin(), weights.end(), int64_t{0});
  std::vector<int64_t> out(weights.size(), 0);
  if (total <= 0 || n <= 0) return out;
  std::vector<std::pair<int64_t, size_t>> remainders;  // (remainder, index)
  int64_t given = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    out[i] = n * weights[i] / total;
    given += out[i];
    remainders.emplace_back(n * weights[i] % total, i);
  }
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < n; ++k, ++given) ++out[remainders[k % remainders.size()].second];
  return out;
}

std::vector<Span> ShareRanges(int64_t n, const std::vector<int64_t>& weights) {
  std::vector<Span> out;
  int64_t at = 0;
  for (int64_t count : ProportionalShares(n, weights)) {
    out.push_back({at, at + count});
    at += count;
  }
  return out;
}

torch::Tensor PadForModel(const torch::Tensor& chw, int64_t align_px) {
  const int64_t h = chw.size(1), w = chw.size(2);
  const int64_t ph = PadTo(h, align_px) - h, pw = PadTo(w, align_px) - w;
  if (ph == 0 && pw == 0) return chw;
  namespace F = torch::nn::functional;
  return F::pad(chw.unsqueeze(0), F::PadFuncOptions({0, pw, 0, ph}).mode(torch::kReplicate))
      .squeeze(0)
      .contiguous();
}

torch::Tensor CropTileInput(const torch::Tensor& chw, const Tile& t) {
  return chw.narrow(1, t.y.begin, t.y.size()).narrow(2, t.x.begin, t.x.size()).contiguous();
}

torch::Tensor OwnedPart(const torch::Tensor& tile_out, const Tile& t) {
  return tile_out.narrow(1, t.own_y.begin - t.y.begin, t.own_y.size())
      .narrow(2, t.own_x.begin - t.x.begin, t.own_x.size())
      .contiguous();
}

void PlaceOwnedPart(torch::Tensor& canvas, const torch::Tensor& owned, const Tile& t) {
  canvas.narrow(1, t.own_y.begin, t.own_y.size())
      .narrow(2, t.own_x.begin, t.own_x.size())
      .copy_(owned);
}

}  // namespace tessera::worker
