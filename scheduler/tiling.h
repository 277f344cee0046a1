// Tiling: tiled inference for images too large for one device.
//
// Purpose: choose a square tile side and the overlap between neighbouring tiles
// (2 x the model's halo, so every output pixel sees its full receptive field),
// then share the tiles of a batch of images across devices by speed (integer
// water-filling). Each device runs the whole model on its tiles, as many at once
// as its memory allows. Tile time scales with tile pixels over nominal pixels.
// Thread safety: pure functions over a const CostModel.
#ifndef TESSERA_SCHEDULER_TILING_H_
#define TESSERA_SCHEDULER_TILING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/cost_model.h"
#include "scheduler/plan.h"

namespace tessera::scheduler {

struct TiledPlan {
  Tiling tiling;
  std::vector<int> devices;         // device-table indices that get tiles
  std::vector<int64_t> tiles;       // tiles per device per step
  std::vector<int64_t> concurrent;  // tiles each device processes at once
  std::vector<double> device_s;     // per device seconds per step
  std::vector<int64_t> peak_memory_bytes;
  double step_s = 0;
};

// Tiles along one axis of `length` pixels for tiles of `tile` with `overlap`.
int64_t TilesAlong(int length, int tile, int overlap);

// Best tile size for `images` images of width x height on `devices`, a plan
// that gives tiles to at least `min_devices` devices before any that does not:
// where the split by speed would leave a slow device without a tile, every
// device the tile fits gets one when that makes min_devices (the job asked
// for them). Infeasible tile sizes add a one-line reason to *reasons.
std::optional<TiledPlan> PlanTiles(const CostModel& cost, const std::vector<int>& devices,
                                   int width, int height, int halo_px, int64_t images,
                                   int64_t min_devices, std::vector<std::string>* reasons);

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_TILING_H_
