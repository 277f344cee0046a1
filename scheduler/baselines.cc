// Baselines: the two hand-made plans (scheduler/baselines.h).
//
// Steps (ScoreBaselines):
//   1. even_all: EvenSplit over all free devices, or the max_devices fastest (back in
//      device-table order); "the whole batch on <device>" for one device, "an even
//      split over all N devices", or "an even split over the k fastest of N devices".
//   2. best_group: EvenSplit over each speed class (equal type and throughput; its
//      max_devices fastest), described "the 2 A100s alone" (with the speed per sample
//      when a type has several classes, "(of n)" when capped); the feasible class with
//      the lowest step time (ties: the first). None feasible: the first 3 reasons,
//      "; ..." when there are more.
// EvenSplit(devices):
//   1. Infeasible without devices, with fewer than min_devices or with B < N.
//   2. Shares B / N, the remainder one each to the first devices (device-table order);
//      a device that cannot hold the whole model plus one sample: infeasible.
//   3. M = the smallest count that fits memory (max over devices of ceil(b_i / cap_i));
//      scored at M, and at M + 1 when M does not fit (rounding at the memory limit).
//   4. Infeasible when the smallest share is below M, or with the evaluation's reason.
#include "scheduler/baselines.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/planner_text.h"

namespace tessera::scheduler {

namespace {

// "the 2 A100s alone", "the 3 emulated-0.5 devices alone": model names (a letter,
// then letters and digits, at least one digit) take a plural s, other types "devices".
std::string GroupDescription(const std::string& type, int n) {
  const bool model_name =
      !type.empty() && std::isalpha(static_cast<unsigned char>(type[0])) &&
      std::all_of(type.begin(), type.end(),
                  [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)); }) &&
      std::any_of(type.begin(), type.end(),
                  [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
  const std::string kind = type.empty() ? "device" : type;
  std::string noun;
  if (model_name) {
    noun = n == 1 ? kind : kind + "s";
  } else {
    noun = type.empty() ? (n == 1 ? "device" : "devices")
                        : (n == 1 ? kind + " device" : kind + " devices");
  }
  return "the " + (n == 1 ? std::string() : std::to_string(n) + " ") + noun;
}

// Data parallel over `devs` (device-table order) with even shares: B / N each, the
// remainder one each to the first devices; M = the smallest count that fits memory.
ScoredBaseline EvenSplit(const CostModel& cm, const JobRequest& req, const std::vector<int>& devs,
                         std::string name, std::string description) {
  ScoredBaseline out;
  out.info.name = std::move(name);
  out.info.description = std::move(description);
  auto fail = [&out](std::string reason) {
    out.info.feasible = false;
    out.info.reason = std::move(reason);
    return out;
  };
  const int k = static_cast<int>(devs.size());
  const int64_t B = req.global_batch;
  if (k == 0) return fail("no free device");
  if (k < req.min_devices) {
    return fail("the job needs at least " + std::to_string(req.min_devices) + " devices");
  }
  if (B < k) {
    return fail("global batch " + std::to_string(B) + " is less than one sample per device");
  }
  const int L = cm.num_layers();
  const double weights = cm.ReplicaWeightBytes(0, L, /*replicated=*/k > 1);
  const double act = cm.ActivationBytesPerSample(0, L);
  Candidate& c = out.candidate;
  c.schedule = cm.training() ? Schedule::k1F1B : Schedule::kGPipe;
  int64_t micro = 1;
  for (int i = 0; i < k; ++i) {
    const DeviceInfo& d = cm.device(devs[i]);
    const double usable = static_cast<double>(d.usable_bytes);
    if (usable < weights + act) {
      return fail("the whole model needs " + Gb(weights + act) + " for one sample and " +
                  d.id.ToString() + " has " + Gb(usable) + " usable");
    }
    const int64_t share = B / k + (i < B % k ? 1 : 0);
    c.replicas.push_back(CandidateReplica{share, {CandidateStage{devs[i], 0, L}}});
    if (act > 0) {
      const double cap = std::max(1.0, std::floor((usable - weights) / act));
      micro = std::max(micro, static_cast<int64_t>(std::ceil(static_cast<double>(share) / cap)));
    }
  }
  // Memory grows only with ceil(share / M); the first count that fits is the answer
  // (a second try covers rounding at the memory limit).
  const int64_t smallest_share = B / k;
  for (int64_t m = micro; m <= std::min(smallest_share, micro + 1); ++m) {
    c.micro_batches = static_cast<int>(m);
    out.ev = cm.Evaluate(c);
    if (out.ev.feasible) break;
  }
  if (micro > smallest_share) {
    return fail("shares of " + std::to_string(smallest_share) + " samples need " +
                std::to_string(micro) + " micro-batches to fit in memory");
  }
  if (!out.ev.feasible) return fail(out.ev.reason);
  out.info.feasible = true;
  out.info.step_s = out.ev.step_s;
  return out;
}

}  // namespace

// even_all, then best_group (scheduler/plan.h, Baseline). Linear in the devices.
std::vector<ScoredBaseline> ScoreBaselines(const CostModel& cm, const JobRequest& req,
                                           const std::vector<int>& free_devices) {
  const int n = static_cast<int>(free_devices.size());
  const int cap = req.max_devices > 0 ? std::min(req.max_devices, n) : n;
  // The `k` fastest of a list, back in device-table order.
  auto fastest = [&cm](std::vector<int> devs, int k) {
    if (static_cast<int>(devs.size()) > k) {
      std::stable_sort(devs.begin(), devs.end(), [&cm](int a, int b) {
        return cm.device(a).model_seconds < cm.device(b).model_seconds;
      });
      devs.resize(k);
      std::sort(devs.begin(), devs.end());
    }
    return devs;
  };
  std::vector<ScoredBaseline> out;
  std::string all;
  if (n == 1) {
    all = "the whole batch on " + cm.device(free_devices[0]).id.ToString();
  } else if (cap == n) {
    all = "an even split over all " + std::to_string(n) + " devices";
  } else {
    all = "an even split over the " + std::to_string(cap) + " fastest of " + std::to_string(n) +
          " devices";
  }
  out.push_back(EvenSplit(cm, req, fastest(free_devices, cap), "even_all", all));

  std::map<int, std::vector<int>> by_class;
  std::map<std::string, std::set<int>> classes_of_type;
  for (int d : free_devices) {
    by_class[cm.device(d).speed_class].push_back(d);
    classes_of_type[cm.device(d).type].insert(cm.device(d).speed_class);
  }
  std::optional<ScoredBaseline> best;
  std::vector<std::string> reasons;
  for (const auto& [cls, devs] : by_class) {
    const std::vector<int> group = fastest(devs, cap);
    const DeviceInfo& d = cm.device(group[0]);
    std::string desc = GroupDescription(d.type, static_cast<int>(group.size()));
    // One type in several speed classes (emulated speeds): tell them apart by speed.
    if (classes_of_type[d.type].size() > 1) desc += " at " + Ms(d.model_seconds) + " per sample";
    if (static_cast<int>(group.size()) < static_cast<int>(devs.size())) {
      desc += " (of " + std::to_string(devs.size()) + ")";
    }
    desc += " alone";
    ScoredBaseline s = EvenSplit(cm, req, group, "best_group", desc);
    if (!s.info.feasible) {
      if (reasons.size() < 3) reasons.push_back(desc + ": " + s.info.reason);
      continue;
    }
    if (!best || s.info.step_s < best->info.step_s) best = std::move(s);
  }
  if (!best) {
    best.emplace();
    best->info.name = "best_group";
    best->info.description = "the best group of identical devices";
    best->info.feasible = false;
    for (size_t i = 0; i < reasons.size(); ++i) best->info.reason += (i ? "; " : "") + reasons[i];
    if (by_class.size() > reasons.size()) best->info.reason += "; ...";
  }
  out.push_back(std::move(*best));
  return out;
}

// "1.42x an even split over all 5 devices, 1.18x the 2 A100s alone"; an infeasible
// baseline: "<description> does not fit: <reason>".
std::string SpeedupText(const std::vector<BaselineScore>& scores) {
  std::string s;
  for (const BaselineScore& b : scores) {
    if (!s.empty()) s += ", ";
    s += b.feasible ? Fmt("%.2fx ", b.speedup) + b.description
                    : b.description + " does not fit: " + b.reason;
  }
  return s;
}

}  // namespace tessera::scheduler
