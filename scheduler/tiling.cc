#include "scheduler/tiling.h"

#include <algorithm>
#include <cmath>

#include "scheduler/batch_split.h"

namespace tessera::scheduler {

int64_t TilesAlong(int length, int tile, int overlap) {
  if (tile >= length) return 1;
  const int stride = tile - overlap;
  if (stride <= 0) return 0;
  return 1 + (length - tile + stride - 1) / stride;
}

std::optional<TiledPlan> PlanTiles(const CostModel& cost, const std::vector<int>& devices,
                                   int width, int height, int halo_px, int64_t images,
                                   int64_t min_devices, std::vector<std::string>* reasons) {
  const int overlap = 2 * halo_px;
  const int longest = std::max(width, height);
  const double weights = cost.WeightBytes(0, cost.num_layers());
  std::optional<TiledPlan> best;
  std::vector<int> sizes;
  for (int t = 64; t < longest; t = t < 512 ? t + 32 : t + 128) sizes.push_back(t);
  sizes.push_back(longest);
  int largest_fitting = 0;
  for (int t : sizes) {
    if (t <= overlap) continue;
    const int64_t per_image = TilesAlong(width, t, overlap) * TilesAlong(height, t, overlap);
    if (per_image <= 0) continue;
    const int64_t total = per_image * images;
    const double act = cost.TileActivationBytes(t);
    std::vector<int> fit;
    std::vector<double> secs;
    std::vector<int64_t> concurrent;
    for (int d : devices) {
      const double free_bytes = static_cast<double>(cost.device(d).usable_bytes) - weights;
      if (free_bytes < act) continue;
      fit.push_back(d);
      secs.push_back(cost.TileSeconds(d, t));
      concurrent.push_back(static_cast<int64_t>(std::min(1e12, std::floor(free_bytes / act))));
    }
    if (fit.empty()) continue;
    largest_fitting = t;
    std::vector<int64_t> caps(fit.size(), total);
    auto shares = SplitBatchLinear(total, secs, caps, 0);
    const auto fitting = static_cast<int64_t>(fit.size());
    if (shares && fitting >= min_devices && total >= fitting &&
        std::count_if(shares->begin(), shares->end(), [](int64_t n) { return n > 0; }) <
            min_devices) {
      shares = SplitBatchLinear(total, secs, caps, 1);  // a tile on every fitting device
    }
    if (!shares) continue;
    TiledPlan p;
    p.tiling = Tiling{t, overlap, per_image};
    for (size_t i = 0; i < fit.size(); ++i) {
      const int64_t n = (*shares)[i];
      if (n == 0) continue;
      const int64_t k = std::min(concurrent[i], n);
      const double s = static_cast<double>(n) * secs[i] +
                       static_cast<double>((n + k - 1) / k) * cost.options().micro_batch_overhead_s;
      p.devices.push_back(fit[i]);
      p.tiles.push_back(n);
      p.concurrent.push_back(k);
      p.device_s.push_back(s);
      p.peak_memory_bytes.push_back(static_cast<int64_t>(weights + static_cast<double>(k) * act));
      p.step_s = std::max(p.step_s, s);
    }
    const bool enough = static_cast<int64_t>(p.devices.size()) >= min_devices;
    const bool best_enough = best && static_cast<int64_t>(best->devices.size()) >= min_devices;
    if (!best || (enough && !best_enough) || (enough == best_enough && p.step_s < best->step_s)) {
      best = std::move(p);
    }
  }
  if (!best && reasons != nullptr) {
    reasons->push_back("no tile of 64 px or more fits next to the model weights (" +
                       std::to_string(static_cast<int64_t>(weights / 1e6)) + " MB) on any device");
  } else if (best && reasons != nullptr && largest_fitting < longest) {
    reasons->push_back("tiles above " + std::to_string(largest_fitting) +
                       " px do not fit on any free device");
  }
  return best;
}

}  // namespace tessera::scheduler
