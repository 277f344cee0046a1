// ComputeCorrection: profiles corrected by what running jobs observe.
//
// Every plan rests on predicted compute times, and one profile measured on a
// busy host (or at another crop size than the job's) skews them all. A rank
// reports its compute time per step (the worker's compute_s: forward and
// backward, the device's busy time); its stage in the plan predicted one
// (Stage::compute_s, made with Stage::compute_scale). Their ratio, undone of
// the scale the plan already applied, is what the device type really takes
// against the profile. Per (key, device type) this keeps the newest kWindow
// ratios; the factor is their median (one slow step, a checkpoint, a
// neighbour's burst do not move it) once kMinSamples are in, else 1.
// Apply sets Device::compute_scale from the factors, so the next plan of a
// job with the same key (the cost model scales every compute term) and the
// allocation across jobs use the corrected times.
//
// The steps of Observe: (1) drop a ratio outside [1/20, 20] (a stalled or
// broken step, not a profile); (2) append it to the window of (key, type),
// dropping the oldest beyond kWindow; (3) recompute the median; (4) when the
// factor moved by more than kNotable (relative) since the last notable
// change, bump generation(), so callers re-plan what was planned with it.
//
// Keys are the caller's: tesserad uses the job's entrypoint and the options
// that change its compute (daemon/controller/planning.h, CorrectionKey).
//
// Ownership: a value. Thread safety: none (the caller locks); no I/O, clocks
// or threads.
#ifndef TESSERA_SCHEDULER_COMPUTE_CORRECTION_H_
#define TESSERA_SCHEDULER_COMPUTE_CORRECTION_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>

#include "scheduler/cluster_snapshot.h"

namespace tessera::scheduler {

class ComputeCorrection {
 public:
  static constexpr int kWindow = 24;
  static constexpr int kMinSamples = 6;
  static constexpr double kNotable = 0.05;

  // One step of one rank: `predicted_s` the stage's predicted compute with
  // `plan_scale` applied (Stage::compute_s, Stage::compute_scale),
  // `observed_s` the rank's reported compute. Ignored unless all are > 0.
  void Observe(const std::string& key, const std::string& device_type, double predicted_s,
               double plan_scale, double observed_s);

  // The factor of (key, type): observed over the profile's prediction; 1
  // before kMinSamples observations.
  double Factor(const std::string& key, const std::string& device_type) const;
  // Observations kept for (key, type) (at most kWindow).
  int Samples(const std::string& key, const std::string& device_type) const;

  // Sets compute_scale of every device of `snapshot` to its type's factor for
  // `key`. A type without one whose times come from another device's
  // measurement (Device::measured_as: emulated GPUs and CPUs all use the
  // worker's CPU profile, divided by their speed) takes the median factor of
  // the types of that measurement that have one: a profile measured on a
  // busy host is as far off for every one of them. Otherwise 1.
  void Apply(const std::string& key, ClusterSnapshot* snapshot) const;

  // Forgets every observation of `key` (its profile was measured again: the
  // ratios were against the old one); its factors are 1 again. Bumps
  // generation() when a factor of it was not 1.
  void Reset(const std::string& key);

  // Bumped by every notable change of a factor.
  uint64_t generation() const { return generation_; }

 private:
  struct Window {
    std::deque<double> ratios;
    double factor = 1.0;
    double notable = 1.0;  // the factor at the last notable change
  };
  std::map<std::pair<std::string, std::string>, Window> windows_;
  uint64_t generation_ = 0;
};

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_COMPUTE_CORRECTION_H_
