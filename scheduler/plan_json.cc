#include "scheduler/plan_json.h"

#include <string>

namespace tessera::scheduler {

using Json = nlohmann::json;

namespace {

// {name, description, feasible, reason (infeasible only), step_s, speedup}; step_s and
// speedup are null when infeasible.
Json ScoreJson(const BaselineScore& b) {
  Json j{{"name", b.name}, {"description", b.description}, {"feasible", b.feasible}};
  if (!b.feasible) j["reason"] = b.reason;
  j["step_s"] = b.feasible ? Json(b.step_s) : Json(nullptr);
  j["speedup"] = b.feasible ? Json(b.speedup) : Json(nullptr);
  return j;
}

}  // namespace

Json ToJson(const Plan& plan) {
  Json j;
  j["layout"] = std::string(LayoutName(plan.layout));
  j["dp"] = plan.dp;
  j["pp"] = plan.pp;
  j["micro_batches"] = plan.micro_batches;
  j["schedule"] = std::string(ScheduleName(plan.schedule));
  Json replicas = Json::array();
  for (const Replica& r : plan.replicas) {
    Json stages = Json::array();
    for (const Stage& s : r.stages) {
      Json devices = Json::array();
      for (const DeviceId& d : s.devices) devices.push_back(d.ToString());
      stages.push_back({{"devices", devices},
                        {"layers", Json::array({s.layer_begin, s.layer_end})},
                        {"time_s", s.time_s},
                        {"compute_s", s.compute_s},
                        {"compute_scale", s.compute_scale},
                        {"peak_mem_bytes", s.peak_memory_bytes}});
    }
    replicas.push_back(
        {{"batch", r.batch}, {"grad_weight", r.gradient_weight}, {"stages", stages}});
  }
  j["replicas"] = replicas;
  if (plan.tiling) {
    j["tiling"] = {{"tile_px", plan.tiling->tile_px},
                   {"overlap_px", plan.tiling->overlap_px},
                   {"tiles_per_image", plan.tiling->tiles_per_image}};
  }
  Json mem = Json::object();
  for (const auto& [id, bytes] : plan.predicted.peak_memory_bytes) mem[id] = bytes;
  j["predicted"] = {{"step_s", plan.predicted.step_s},
                    {"samples_per_s", plan.predicted.samples_per_s},
                    {"bubble", plan.predicted.bubble},
                    {"comm", plan.predicted.comm},
                    {"peak_mem_bytes", mem}};
  j["why"] = plan.why;
  if (!plan.baselines.empty()) {
    Json baselines = Json::array();
    for (const BaselineScore& b : plan.baselines) baselines.push_back(ScoreJson(b));
    j["baselines"] = baselines;
  }
  return j;
}

Json ToJson(const PlanSet& set) {
  Json plans = Json::array();
  for (const Plan& p : set.plans) plans.push_back(ToJson(p));
  Json rejected = Json::array();
  for (const Rejection& r : set.rejected) {
    rejected.push_back({{"layout", r.layout == Layout::kAuto ? std::string("any")
                                                             : std::string(LayoutName(r.layout))},
                        {"reason", r.reason}});
  }
  Json baselines = Json::array();
  for (const Baseline& b : set.baselines) {
    Json j = ScoreJson(b);
    j["plan"] = b.plan ? ToJson(*b.plan) : Json(nullptr);
    baselines.push_back(std::move(j));
  }
  return Json{{"plans", plans}, {"rejected", rejected}, {"baselines", baselines}};
}

}  // namespace tessera::scheduler
