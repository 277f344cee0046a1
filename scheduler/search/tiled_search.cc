// Tiled search: inference on overlapping tiles of each image (Search::SearchTiled,
// scheduler/search/search.h).
//
// Steps:
//   1. Devices: the max_devices fastest.
//   2. PlanTiles (scheduler/tiling.h) for the request's image (else the nominal
//      square): tile side and overlap (2 x halo), tiles shared by speed (a tile on
//      every fitting device where the split would leave fewer than min_devices with
//      one); its reasons are noted.
//   3. Fewer devices with tiles than min_devices: a reason, no plan.
//   4. The Plan itself (the cost model scores no tiles): one single-stage replica per
//      device with its tiles as batch; kept in tiled_.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/search/search.h"
#include "scheduler/tiling.h"

namespace tessera::scheduler {

void Search::SearchTiled() {
  const int nominal = nominal_px_;
  const int w = req_.image ? req_.image->width : nominal;
  const int h = req_.image ? req_.image->height : nominal;
  std::vector<int> devs = by_speed_;
  if (static_cast<int>(devs.size()) > max_devices_) devs.resize(max_devices_);
  std::vector<std::string> reasons;
  auto tp = PlanTiles(cm_, devs, w, h, halo_px_, req_.global_batch, req_.min_devices, &reasons);
  for (const std::string& r : reasons) Note(Layout::kTiled, r);
  if (!tp) return;
  if (static_cast<int>(tp->devices.size()) < req_.min_devices) {
    Note(Layout::kTiled, "fewer than min_devices devices get tiles");
    return;
  }
  Plan p;
  p.layout = Layout::kTiled;
  p.dp = static_cast<int>(tp->devices.size());
  p.pp = 1;
  p.micro_batches = 1;
  p.schedule = Schedule::kGPipe;
  p.tiling = tp->tiling;
  int64_t total_tiles = 0;
  for (int64_t t : tp->tiles) total_tiles += t;
  for (size_t i = 0; i < tp->devices.size(); ++i) {
    const DeviceInfo& d = cm_.device(tp->devices[i]);
    Replica r;
    r.batch = tp->tiles[i];
    r.gradient_weight = static_cast<double>(tp->tiles[i]) / static_cast<double>(total_tiles);
    r.stages.push_back(Stage{{d.id},
                             0,
                             cm_.num_layers(),
                             tp->device_s[i] / static_cast<double>(tp->tiles[i]),
                             tp->peak_memory_bytes[i]});
    p.replicas.push_back(std::move(r));
    p.predicted.peak_memory_bytes[d.id.ToString()] = tp->peak_memory_bytes[i];
  }
  p.predicted.step_s = tp->step_s;
  p.predicted.samples_per_s = static_cast<double>(req_.global_batch) / tp->step_s;
  p.why = std::to_string(tp->tiling.tiles_per_image) + " tiles of " +
          std::to_string(tp->tiling.tile_px) + " px (overlap " +
          std::to_string(tp->tiling.overlap_px) + " px) per image, shared by speed";
  tiled_ = std::move(p);
}

}  // namespace tessera::scheduler
