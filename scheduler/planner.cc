// MakePlans: the planner's entry point (scheduler/planner.h). The search itself is in
// scheduler/search/ (one file per layout), the hand-made baselines in
// scheduler/baselines.h.
//
// Steps (MakePlans):
//   1. Validate the cluster, model, request and options.
//   2. One collective backend per job: when the free devices use more than one, each
//      backend's devices (with those without a backend) are planned alone by
//      MakePlansOneBackend and the backend with the fastest best plan is kept; a
//      rejection says so and gives the other backends' best step time or failure.
// Steps (MakePlansOneBackend):
//   1. Filter: busy devices and devices without throughput or memory are excluded (a
//      rejection lists each kind); none left, or fewer than min_devices: a failure.
//   2-4. Rank, partition, score: Search::Run (scheduler/search/search.h).
//   5. Baselines (ScoreBaselines; none for tiled-only inference). With layout auto or
//      data, a baseline faster than the best data plan becomes the data plan.
//   6. Margin (layout auto): when the best plan found beats the best feasible baseline
//      by less than PlannerOptions::baseline_margin, that baseline is kept as the data
//      plan and ranks first.
//   7. Plans best first (ToPlan); reasons only for the layouts without a plan; the
//      first plan's `why` gets the layouts and candidates counted and its speedups
//      over the baselines, the others their step time relative to it. No plan: a
//      failure that lists every reason.
#include "scheduler/planner.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/baselines.h"
#include "scheduler/planner_text.h"
#include "scheduler/search/search.h"

namespace tessera::scheduler {

namespace {

// A plan's `why`: its bottleneck stage or slowest replica, bubble and all-reduce.
std::string Describe(const CostModel& cm, const Candidate& c, const Evaluation& ev) {
  const CandidateReplica& crit = c.replicas[ev.critical_replica];
  const CandidateStage& st = crit.stages[ev.bottleneck_stage];
  const std::string dev = cm.device(st.device).id.ToString();
  std::string s;
  if (crit.stages.size() > 1) {
    s = "stage " + std::to_string(ev.bottleneck_stage) + " (" + dev + ", layers [" +
        std::to_string(st.begin) + "," + std::to_string(st.end) + ")) is the bottleneck at " +
        Ms(ev.stage_time_s[ev.critical_replica][ev.bottleneck_stage]) + " per micro-batch";
  } else {
    s = "slowest replica " + dev + " computes " + std::to_string(crit.batch) + " samples";
  }
  if (ev.bubble > 0.005) s += Fmt(", bubble %.0f%%", ev.bubble * 100);
  if (ev.allreduce_s > 0) s += ", all-reduce adds " + Ms(ev.allreduce_s);
  return s;
}

}  // namespace

Layout LayoutOf(const Candidate& c) {
  bool multi = false;
  for (const CandidateReplica& r : c.replicas) multi |= r.stages.size() > 1;
  if (!multi) return Layout::kData;
  return c.replicas.size() == 1 ? Layout::kPipeline : Layout::kHybrid;
}

Plan ToPlan(const CostModel& cm, const Candidate& c, const Evaluation& ev) {
  Plan p;
  p.layout = LayoutOf(c);
  p.dp = static_cast<int>(c.replicas.size());
  p.micro_batches = c.micro_batches;
  p.schedule = c.schedule;
  for (size_t r = 0; r < c.replicas.size(); ++r) {
    const CandidateReplica& cr = c.replicas[r];
    Replica rep;
    rep.batch = cr.batch;
    rep.gradient_weight = static_cast<double>(cr.batch) / static_cast<double>(cm.global_batch());
    for (size_t s = 0; s < cr.stages.size(); ++s) {
      const CandidateStage& cs = cr.stages[s];
      const DeviceId& id = cm.device(cs.device).id;
      rep.stages.push_back(Stage{{id},
                                 cs.begin,
                                 cs.end,
                                 ev.stage_time_s[r][s],
                                 ev.stage_memory_bytes[r][s],
                                 ev.stage_compute_s[r][s],
                                 cm.device(cs.device).compute_scale});
      p.predicted.peak_memory_bytes[id.ToString()] = ev.stage_memory_bytes[r][s];
    }
    p.pp = std::max(p.pp, static_cast<int>(cr.stages.size()));
    p.replicas.push_back(std::move(rep));
  }
  p.predicted.step_s = ev.step_s;
  p.predicted.samples_per_s = ev.samples_per_s;
  p.predicted.bubble = ev.bubble;
  p.predicted.comm = ev.comm;
  p.why = Describe(cm, c, ev);
  return p;
}

namespace {

// MakePlans on devices of one collective backend (or devices without one).
Result<PlanSet> MakePlansOneBackend(const ClusterSnapshot& cluster, const ModelProfile& model,
                                    const JobRequest& request, const PlannerOptions& options) {
  const CostModel cm = CostModel::Create(cluster, model, request, options.cost);

  PlanSet out;
  // Step 1: filter devices.
  std::vector<int> free_devices;
  std::vector<std::string> busy, slow;
  for (int i = 0; i < cm.num_devices(); ++i) {
    const DeviceInfo& d = cm.device(i);
    if (d.busy) {
      busy.push_back(d.id.ToString());
    } else if (d.model_seconds >= 1e8 || d.memory_bytes <= 0) {
      // A device the agent could not measure says why ("gpubox:0 (benchmark of
      // cuda:0 failed: ...)"), so the lab sees the cause, not a silent 0.
      slow.push_back(d.unmeasured_reason.empty()
                         ? d.id.ToString()
                         : d.id.ToString() + " (" + d.unmeasured_reason + ")");
    } else {
      free_devices.push_back(i);
    }
  }
  auto list = [](const std::vector<std::string>& ids) {
    std::string s;
    for (size_t i = 0; i < ids.size() && i < 8; ++i) s += (i ? ", " : "") + ids[i];
    if (ids.size() > 8) s += ", ... (" + std::to_string(ids.size()) + " in all)";
    return s;
  };
  if (!busy.empty()) out.rejected.push_back({Layout::kAuto, "busy, excluded: " + list(busy)});
  if (!slow.empty()) {
    out.rejected.push_back(
        {Layout::kAuto, "no measured throughput or memory, excluded: " + list(slow)});
  }
  auto summary = [&out](std::string head) {
    for (const Rejection& r : out.rejected) {
      head += "; ";
      if (r.layout != Layout::kAuto) head += std::string(LayoutName(r.layout)) + ": ";
      head += r.reason;
    }
    return FailedPrecondition(head);
  };
  if (free_devices.empty()) {
    return summary("no free device (" + std::to_string(cm.num_devices()) + " in the cluster)");
  }
  if (static_cast<int>(free_devices.size()) < request.min_devices) {
    return summary("job needs at least " + std::to_string(request.min_devices) + " devices, " +
                   std::to_string(free_devices.size()) + " free");
  }

  // Steps 2-4: rank, partition, score.
  Search search(cm, request, options, free_devices);
  search.nominal_px_ = model.nominal_image_px;
  search.halo_px_ = model.halo_px;
  search.model_name_ = model.name;
  search.Run();

  // Step 5: the hand-made baselines, scored like every candidate. A baseline faster
  // than the best data plan found takes its place (the search never returns a plan
  // slower than a plan a lab would make by hand); forced non-data layouts only
  // report the comparison. Tiled-only inference has none.
  std::vector<ScoredBaseline> baselines;
  if (!(request.kind == JobKind::kInfer && request.layout == Layout::kTiled)) {
    baselines = ScoreBaselines(cm, request, free_devices);
  }
  const ScoredBaseline* winner = nullptr;
  if (search.Wants(Layout::kData)) {
    auto data = search.best_.find(Layout::kData);
    double bar = data == search.best_.end() ? kInf : data->second.second.step_s;
    for (const ScoredBaseline& b : baselines) {
      if (b.info.feasible && b.ev.step_s < bar * (1 - 1e-12)) {
        winner = &b;
        bar = b.ev.step_s;
      }
    }
    if (winner) search.best_[Layout::kData] = {winner->candidate, winner->ev};
  }
  // Within the margin of the best baseline, the baseline is kept (PlannerOptions).
  const ScoredBaseline* kept = nullptr;
  double kept_over = 0;  // the best other plan's step time, when a baseline is kept
  if (request.layout == Layout::kAuto && options.baseline_margin > 0) {
    const ScoredBaseline* base = nullptr;
    for (const ScoredBaseline& b : baselines) {
      if (b.info.feasible && (base == nullptr || b.ev.step_s < base->ev.step_s)) base = &b;
    }
    double found = search.tiled_ ? search.tiled_->predicted.step_s : kInf;
    for (const auto& [layout, best] : search.best_) found = std::min(found, best.second.step_s);
    if (base != nullptr && found < base->ev.step_s * (1 - 1e-12) &&
        found > base->ev.step_s * (1 - options.baseline_margin)) {
      kept = base;
      kept_over = found;
      winner = base;
      search.best_[Layout::kData] = {base->candidate, base->ev};
    }
  }

  for (auto& [layout, best] : search.best_) {
    out.plans.push_back(ToPlan(cm, best.first, best.second));
    if (winner && layout == Layout::kData) {
      out.plans.back().why = winner->info.description + ": " + out.plans.back().why;
    }
  }
  if (search.tiled_) out.plans.push_back(*search.tiled_);
  std::stable_sort(out.plans.begin(), out.plans.end(), [&kept](const Plan& a, const Plan& b) {
    if (kept) {  // the kept baseline (the data plan) goes first
      const bool ka = a.layout == Layout::kData, kb = b.layout == Layout::kData;
      if (ka != kb) return ka;
    }
    return a.predicted.step_s < b.predicted.step_s;
  });
  std::set<Layout> has_plan;
  for (const Plan& p : out.plans) has_plan.insert(p.layout);
  for (auto& [layout, reasons] : search.reasons_) {
    if (has_plan.count(layout)) continue;  // keep reasons only for layouts ruled out
    for (const std::string& r : reasons) out.rejected.push_back({layout, r});
  }
  if (!out.plans.empty()) {
    Plan& chosen = out.plans.front();
    const double best = chosen.predicted.step_s;
    for (const ScoredBaseline& b : baselines) {
      Baseline full = b.info;
      if (full.feasible) {
        full.speedup = best > 0 ? full.step_s / best : 0;
        full.plan = ToPlan(cm, b.candidate, b.ev);
        full.plan->why = full.description + ": " + full.plan->why;
      }
      chosen.baselines.push_back(static_cast<const BaselineScore&>(full));
      out.baselines.push_back(std::move(full));
    }
    const std::string layouts = std::to_string(out.plans.size()) + " layouts";
    const std::string scored = std::to_string(search.evaluated_) + " candidates scored";
    std::string head = "fastest of " + layouts + " (" + scored + ")";
    std::string tail = chosen.why;
    if (kept) {
      head = kept->info.description +
             Fmt(" is kept: the best other plan is predicted only %.1f%% faster",
                 (1 - kept_over / best) * 100) +
             Fmt(" (%.0f%% margin; ", options.baseline_margin * 100) + layouts + ", " + scored +
             ")";
      tail = tail.substr(kept->info.description.size() + 2);
    } else if (winner && chosen.layout == Layout::kData) {
      head = winner->info.description + " is the best plan found (fastest of " + layouts + ", " +
             scored + ")";
      tail = tail.substr(winner->info.description.size() + 2);
    }
    if (!chosen.baselines.empty()) head += "; " + SpeedupText(chosen.baselines);
    chosen.why = head + "; " + tail;
    for (size_t i = 1; i < out.plans.size(); ++i) {
      out.plans[i].why = Fmt("%.2fx the chosen step time; ", out.plans[i].predicted.step_s / best) +
                         out.plans[i].why;
    }
    return out;
  }
  return summary("no feasible plan for " +
                 (model.name.empty() ? std::string("the model") : model.name) +
                 " with global batch " + std::to_string(request.global_batch) + " on " +
                 std::to_string(free_devices.size()) + " free devices");
}

// The cluster with only the devices of `backend` (and those without one).
ClusterSnapshot OnlyBackend(const ClusterSnapshot& cluster, const std::string& backend) {
  ClusterSnapshot out = cluster;
  std::set<DeviceId> kept;
  for (Node& n : out.nodes) {
    std::erase_if(n.devices,
                  [&](const Device& d) { return !d.backend.empty() && d.backend != backend; });
    for (const Device& d : n.devices) kept.insert(DeviceId{n.name, d.index});
  }
  std::erase_if(out.device_links,
                [&](const DeviceLink& l) { return !kept.contains(l.a) || !kept.contains(l.b); });
  return out;
}

}  // namespace

Result<PlanSet> MakePlans(const ClusterSnapshot& cluster, const ModelProfile& model,
                          const JobRequest& request, const PlannerOptions& options) {
  TESSERA_RETURN_IF_ERROR(cluster.Validate());
  TESSERA_RETURN_IF_ERROR(model.Validate());
  TESSERA_RETURN_IF_ERROR(request.Validate());
  if (options.max_pipeline_stages < 1) {
    return InvalidArgument("must be at least 1", "max_pipeline_stages");
  }
  // Backends of the devices a plan could use (free ones).
  std::map<std::string, int> backends;
  for (const Node& n : cluster.nodes) {
    for (const Device& d : n.devices) {
      if (!d.busy && !d.backend.empty()) ++backends[d.backend];
    }
  }
  if (backends.size() < 2) return MakePlansOneBackend(cluster, model, request, options);

  // A job's ranks share one collective library: plan each backend's devices alone
  // and keep the fastest.
  struct Option {
    std::string backend;
    Result<PlanSet> plans;
  };
  std::vector<Option> options_by_backend;
  for (const auto& [backend, count] : backends) {
    options_by_backend.push_back(
        {backend, MakePlansOneBackend(OnlyBackend(cluster, backend), model, request, options)});
  }
  const Option* best = nullptr;
  for (const Option& o : options_by_backend) {
    if (!o.plans.ok()) continue;
    if (best == nullptr ||
        o.plans->plans.front().predicted.step_s < best->plans->plans.front().predicted.step_s) {
      best = &o;
    }
  }
  auto devices = [&](const std::string& backend) {
    const int n = backends.at(backend);
    return std::to_string(n) + " " + backend + (n == 1 ? " device" : " devices");
  };
  std::string why =
      "one collective backend per job (NCCL on CUDA GPUs, Gloo on CPUs and "
      "emulated devices; a job's ranks cannot mix them)";
  if (best == nullptr) {
    std::string message = "no feasible plan on any one backend: " + why;
    for (const Option& o : options_by_backend) {
      message += "; the " + devices(o.backend) + ": " + o.plans.status().message();
    }
    return FailedPrecondition(message);
  }
  PlanSet out = *best->plans;
  why += ": planned on the " + devices(best->backend);
  for (const Option& o : options_by_backend) {
    if (&o == best) continue;
    why += "; the " + devices(o.backend) + " alone: ";
    why += o.plans.ok() ? Fmt("%.3f s a step", o.plans->plans.front().predicted.step_s)
                        : o.plans.status().message();
  }
  out.rejected.insert(out.rejected.begin(), Rejection{Layout::kAuto, why});
  return out;
}

}  // namespace tessera::scheduler
