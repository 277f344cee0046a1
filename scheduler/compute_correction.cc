#include "scheduler/compute_correction.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tessera::scheduler {

void ComputeCorrection::Observe(const std::string& key, const std::string& device_type,
                                double predicted_s, double plan_scale, double observed_s) {
  if (!(predicted_s > 0) || !(plan_scale > 0) || !(observed_s > 0)) return;
  // The plan's prediction without the correction it already carried.
  const double ratio = observed_s / (predicted_s / plan_scale);
  if (ratio < 1.0 / 20 || ratio > 20) return;  // (1)
  Window& w = windows_[{key, device_type}];
  w.ratios.push_back(ratio);  // (2)
  if (w.ratios.size() > static_cast<size_t>(kWindow)) w.ratios.pop_front();
  if (w.ratios.size() < static_cast<size_t>(kMinSamples)) return;
  std::vector<double> sorted(w.ratios.begin(), w.ratios.end());  // (3)
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  w.factor = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  if (std::abs(w.factor / w.notable - 1) > kNotable) {  // (4)
    w.notable = w.factor;
    ++generation_;
  }
}

double ComputeCorrection::Factor(const std::string& key, const std::string& device_type) const {
  auto it = windows_.find({key, device_type});
  if (it == windows_.end() || it->second.ratios.size() < static_cast<size_t>(kMinSamples)) {
    return 1.0;
  }
  return it->second.factor;
}

int ComputeCorrection::Samples(const std::string& key, const std::string& device_type) const {
  auto it = windows_.find({key, device_type});
  return it == windows_.end() ? 0 : static_cast<int>(it->second.ratios.size());
}

void ComputeCorrection::Reset(const std::string& key) {
  bool changed = false;
  for (auto it = windows_.lower_bound({key, ""}); it != windows_.end() && it->first.first == key;) {
    changed = changed || it->second.factor != 1.0;
    it = windows_.erase(it);
  }
  if (changed) ++generation_;
}

void ComputeCorrection::Apply(const std::string& key, ClusterSnapshot* snapshot) const {
  // (1) The known factors of the types whose times come from one shared
  // measurement (Device::measured_as), by that measurement, and their median.
  std::map<std::string, std::vector<double>> shared;
  std::set<std::string> seen;
  for (const Node& node : snapshot->nodes) {
    for (const Device& d : node.devices) {
      if (d.measured_as.empty() || !seen.insert(d.type).second) continue;
      if (Samples(key, d.type) >= kMinSamples) shared[d.measured_as].push_back(Factor(key, d.type));
    }
  }
  std::map<std::string, double> median;
  for (auto& [measured_as, f] : shared) {
    std::sort(f.begin(), f.end());
    const size_t n = f.size();
    median[measured_as] = n % 2 == 1 ? f[n / 2] : (f[n / 2 - 1] + f[n / 2]) / 2;
  }
  // (2) Each device: its type's factor, else its measurement's median.
  for (Node& node : snapshot->nodes) {
    for (Device& d : node.devices) {
      d.compute_scale = Factor(key, d.type);
      auto known = median.find(d.measured_as);
      if (Samples(key, d.type) < kMinSamples && known != median.end()) {
        d.compute_scale = known->second;
      }
    }
  }
}

}  // namespace tessera::scheduler
