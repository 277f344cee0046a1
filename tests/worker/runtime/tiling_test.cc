// Tile grids: coverage, alignment, ownership (weights sum to 1), margins of
// at least the halo around owned pixels, shares by weight, and assembly.
#include "worker/runtime/tiling.h"

#include <gtest/gtest.h>

#include <numeric>

#include "scheduler/tiling.h"

namespace tessera::worker {
namespace {

TEST(TilingTest, SpansAlongAnAxis) {
  struct Case {
    int64_t length, tile, overlap;
    std::vector<Span> spans;
  };
  const Case cases[] = {
      {100, 128, 16, {{0, 100}}},              // fits: one span
      {128, 128, 16, {{0, 128}}},              // exactly one
      {200, 128, 16, {{0, 128}, {72, 200}}},   // last one flush with the end
      {240, 128, 16, {{0, 128}, {112, 240}}},  // stride 112 exactly
      {241, 128, 16, {{0, 128}, {112, 240}, {113, 241}}},
      {30, 12, 4, {{0, 12}, {8, 20}, {16, 28}, {18, 30}}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(TileSpansAlong(c.length, c.tile, c.overlap), c.spans)
        << c.length << " " << c.tile << " " << c.overlap;
    EXPECT_EQ(static_cast<int64_t>(c.spans.size()),
              scheduler::TilesAlong(static_cast<int>(c.length), static_cast<int>(c.tile),
                                    static_cast<int>(c.overlap)));
  }
}

TEST(TilingTest, EffectiveSpecRoundsToAlignmentAndHalo) {
  const TileGeometry unet{.halo_px = 56, .align_px = 8};
  Result<TileSpec> s = EffectiveTileSpec({.tile_px = 250, .overlap_px = 0}, unet);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->tile_px, 248);
  EXPECT_EQ(s->overlap_px, 112);
  s = EffectiveTileSpec({.tile_px = 512, .overlap_px = 185}, unet);  // planner asked for more
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->overlap_px, 192);
  Result<TileSpec> tight = EffectiveTileSpec({.tile_px = 119, .overlap_px = 0}, unet);
  EXPECT_EQ(tight.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(tight.status().field(), "tile_px");
  EXPECT_TRUE(EffectiveTileSpec({.tile_px = 120, .overlap_px = 0}, unet).ok());
}

// For many image sizes: tiles cover the image, origins are aligned, every
// pixel has exactly one owner (weights sum to 1), and every owned pixel is at
// least `halo` away from each tile edge that is not an image edge.
TEST(TilingTest, GridOwnershipIsAPartitionWithHaloMargins) {
  struct Case {
    TileGeometry g;
    int64_t tile;
    int64_t height, width;
  };
  const Case cases[] = {
      {{56, 8}, 128, 200, 152}, {{56, 8}, 120, 256, 64}, {{56, 8}, 248, 1000, 336},
      {{10, 1}, 32, 97, 61},    {{10, 1}, 21, 50, 50},   {{10, 1}, 64, 40, 30},
      {{3, 4}, 16, 44, 100},
  };
  for (const Case& c : cases) {
    Result<TileSpec> spec = EffectiveTileSpec({.tile_px = c.tile, .overlap_px = 0}, c.g);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    const int64_t h = PadTo(c.height, c.g.align_px), w = PadTo(c.width, c.g.align_px);
    const TileGrid grid = MakeTileGrid(h, w, *spec);
    ASSERT_EQ(static_cast<int64_t>(grid.tiles.size()), grid.rows * grid.cols);
    std::vector<double> sum(static_cast<size_t>(h * w), 0.0);
    for (const Tile& t : grid.tiles) {
      EXPECT_EQ(t.y.begin % c.g.align_px, 0);
      EXPECT_EQ(t.x.begin % c.g.align_px, 0);
      EXPECT_LE(t.y.size(), spec->tile_px);
      EXPECT_LE(t.x.size(), spec->tile_px);
      EXPECT_TRUE(t.y.begin >= 0 && t.y.end <= h && t.x.begin >= 0 && t.x.end <= w);
      // Owned region inside the tile, with halo margins at inner edges.
      if (t.y.begin > 0) {
        EXPECT_GE(t.own_y.begin - t.y.begin, c.g.halo_px);
      }
      if (t.x.begin > 0) {
        EXPECT_GE(t.own_x.begin - t.x.begin, c.g.halo_px);
      }
      if (t.y.end < h) {
        EXPECT_GE(t.y.end - t.own_y.end, c.g.halo_px);
      }
      if (t.x.end < w) {
        EXPECT_GE(t.x.end - t.own_x.end, c.g.halo_px);
      }
      for (int64_t y = 0; y < h; ++y) {
        for (int64_t x = 0; x < w; ++x) sum[static_cast<size_t>(y * w + x)] += TileWeight(t, y, x);
      }
    }
    for (size_t i = 0; i < sum.size(); ++i) {
      ASSERT_EQ(sum[i], 1.0) << "pixel " << i << " of " << h << "x" << w << " tile " << c.tile;
    }
  }
}

TEST(TilingTest, SharesFollowWeights) {
  struct Case {
    int64_t n;
    std::vector<int64_t> weights;
    std::vector<int64_t> shares;
  };
  const Case cases[] = {
      {10, {3, 1}, {8, 2}},      {12, {3, 2, 1}, {6, 4, 2}}, {7, {1, 1, 1}, {3, 2, 2}},
      {1, {1, 5, 1}, {0, 1, 0}}, {5, {0, 1}, {0, 5}},        {0, {2, 2}, {0, 0}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ProportionalShares(c.n, c.weights), c.shares) << c.n;
    const std::vector<Span> ranges = ShareRanges(c.n, c.weights);
    int64_t at = 0;
    for (size_t i = 0; i < ranges.size(); ++i) {
      EXPECT_EQ(ranges[i].begin, at);
      EXPECT_EQ(ranges[i].size(), c.shares[i]);
      at = ranges[i].end;
    }
    EXPECT_EQ(at, c.n);
  }
}

TEST(TilingTest, UnetHaloBound) {
  EXPECT_EQ(UnetHaloPx(3), 56);
  Result<TileGeometry> unet = TileGeometryForModel("colorize-unet");
  ASSERT_TRUE(unet.ok());
  EXPECT_EQ(unet->align_px, 8);
  EXPECT_EQ(TileGeometryForModel("denoiser-dncnn")->halo_px, 10);
  EXPECT_EQ(TileGeometryForModel("classifier-resnet").status().code(),
            StatusCode::kInvalidArgument);
}

// Assembling "identity model" tiles gives back the padded input exactly.
TEST(TilingTest, AssemblyOfIdentityTilesIsExact) {
  torch::manual_seed(3);
  const torch::Tensor img = torch::rand({2, 45, 70});
  const torch::Tensor padded = PadForModel(img, 8);
  ASSERT_EQ(padded.size(1), 48);
  ASSERT_EQ(padded.size(2), 72);
  // Edge replicate padding.
  EXPECT_TRUE(torch::equal(padded[0][47], padded[0][44]));
  const TileGrid grid = MakeTileGrid(48, 72, {.tile_px = 24, .overlap_px = 8});
  EXPECT_GT(grid.tiles.size(), 4u);
  torch::Tensor canvas = torch::full({2, 48, 72}, -1.0f);
  for (const Tile& t : grid.tiles) {
    PlaceOwnedPart(canvas, OwnedPart(CropTileInput(padded, t), t), t);
  }
  EXPECT_TRUE(torch::equal(canvas, padded));
}

}  // namespace
}  // namespace tessera::worker
