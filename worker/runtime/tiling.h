// Tiling: cut an image too large for one forward pass into overlapping
// tiles, run each tile, and assemble an output equal to the whole-image
// output (up to float rounding).
//
// Vocabulary:
//   halo     how far (in input pixels) an output pixel's value depends on the
//            input: its receptive-field radius, padding effects included.
//   align    tile origins are multiples of the model's total stride (2^depth
//            for a U-Net), so pooling sees the same pixel groups in a tile as
//            in the whole image. The image is padded (edge replicate) to a
//            multiple of align on the bottom / right before tiling, and the
//            whole-image path pads the same way.
//   grid     tiles of side `tile` (rounded down to align), neighbours overlap
//            by at least `overlap` (>= 2 x halo, rounded up to align). Along an
//            axis tile i starts at i x (tile - overlap), the last one at
//            length - tile (scheduler::TilesAlong counts them).
//   owned    the part of the output a tile writes: neighbours split their
//            overlap at its middle, so every owned pixel is >= halo away from
//            any cut edge of its tile and is exact; blending weight is 1
//            inside the owned region and 0 elsewhere, so weights sum to 1 at
//            every pixel and there are no seams.
//   share    tiles of one image are given to ranks in contiguous runs
//            proportional to integer weights (the replicas' batch shares,
//            i.e. device speed), largest remainder first.
//
// Thread safety: pure functions over values (torch helpers allocate new
// tensors or write only the canvas passed in).
#ifndef TESSERA_WORKER_RUNTIME_TILING_H_
#define TESSERA_WORKER_RUNTIME_TILING_H_

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace tessera::worker {

// What a model needs from tiling.
struct TileGeometry {
  int64_t halo_px = 0;   // receptive-field radius in input pixels
  int64_t align_px = 1;  // total stride: tile origins and padded sizes are multiples
};

// Geometry of the reference models as MakeModel / MakeGan build them:
// colorize-unet and gan-pix2pix (U-Net depth 3): halo 56, align 8;
// denoiser-dncnn (10 convolutions 3x3): halo 10, align 1. kInvalidArgument
// for classifier-resnet (global pooling: no tile is independent) and others.
Result<TileGeometry> TileGeometryForModel(const std::string& model_name);

// U-Net of `depth` levels (double 3x3 convolutions, 2x2 pooling): the
// dependence radius is at most 7 x 2^depth - 5; returns 7 x 2^depth.
int64_t UnetHaloPx(int64_t depth);

// Half-open [begin, end).
struct Span {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  friend bool operator==(const Span&, const Span&) = default;
};

struct Tile {
  Span y, x;          // input window in (padded) image coordinates
  Span own_y, own_x;  // output region this tile owns, image coordinates
};

struct TileSpec {
  int64_t tile_px = 0;     // requested side (rounded down to align)
  int64_t overlap_px = 0;  // requested overlap (raised to 2 x halo, rounded up to align)
};

struct TileGrid {
  int64_t height = 0, width = 0;  // padded image size the grid covers
  int64_t tile_px = 0;            // effective side (<= the image side when one tile spans it)
  int64_t overlap_px = 0;         // effective minimum overlap
  int64_t rows = 0, cols = 0;
  std::vector<Tile> tiles;  // row-major
};

// Effective tile side and overlap for a model: tile rounded down to align,
// overlap max(requested, 2 x halo) rounded up to align. kInvalidArgument
// (field "tile_px") when no room is left for a tile stride of one align
// step: tile - overlap < align.
Result<TileSpec> EffectiveTileSpec(const TileSpec& requested, const TileGeometry& geometry);

// Spans along an axis of `length` for tiles of `tile` overlapping by at
// least `overlap`: one span [0, length) when tile >= length.
// REQUIRES: tile > overlap >= 0, length > 0.
std::vector<Span> TileSpansAlong(int64_t length, int64_t tile, int64_t overlap);

// The grid for a (padded) image. REQUIRES: spec from EffectiveTileSpec;
// height and width positive multiples of geometry.align_px.
TileGrid MakeTileGrid(int64_t height, int64_t width, const TileSpec& spec);

// Blending weight of tile `t` at pixel (y, x): 1 if the tile owns it, else 0.
double TileWeight(const Tile& t, int64_t y, int64_t x);

// Counts per weight for `n` items, proportional to `weights`, largest
// remainder first (ties to the lower index). Sums to n. REQUIRES: weights
// non-empty, all >= 0, at least one > 0.
std::vector<int64_t> ProportionalShares(int64_t n, const std::vector<int64_t>& weights);

// Contiguous tile index ranges [begin, end) per weight, in order.
std::vector<Span> ShareRanges(int64_t n, const std::vector<int64_t>& weights);

// Size rounded up to a multiple of align.
int64_t PadTo(int64_t length, int64_t align);

// ---- tensors ([C, H, W] float) ----

// Pads on the bottom / right by edge replication to multiples of align.
torch::Tensor PadForModel(const torch::Tensor& chw, int64_t align_px);
// The input window of a tile. REQUIRES: chw covers the grid.
torch::Tensor CropTileInput(const torch::Tensor& chw, const Tile& t);
// The owned part of a tile's output ([C, own_h, own_w]), contiguous.
// REQUIRES: tile_out is [C, t.y.size(), t.x.size()].
torch::Tensor OwnedPart(const torch::Tensor& tile_out, const Tile& t);
// Copies an owned part into the canvas [C, H, W] at the tile's owned region.
void PlaceOwnedPart(torch::Tensor& canvas, const torch::Tensor& owned, const Tile& t);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_TILING_H_
