#include "worker/runtime/infer_plan.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "worker/runtime/plan.h"

namespace tessera::worker {

using nlohmann::json;

Result<InferPlan> ParseInferPlan(const std::string& json_text, int world_size) {
  TESSERA_ASSIGN_OR_RETURN(json doc, ParsePlanDocument(json_text));
  InferPlan plan;
  plan.rank_weights.assign(static_cast<size_t>(std::max(1, world_size)), 0);
  auto layout = doc.find("layout");
  if (layout != doc.end()) {
    if (!layout->is_string()) return InvalidArgument("must be a string", "layout");
    plan.layout = layout->get<std::string>();
  }
  auto replicas = doc.find("replicas");
  if (replicas != doc.end()) {
    if (!replicas->is_array()) return InvalidArgument("must be an array", "replicas");
    for (size_t r = 0; r < replicas->size(); ++r) {
      const json& rep = (*replicas)[r];
      const std::string rf = "replicas[" + std::to_string(r) + "]";
      if (!rep.is_object()) return InvalidArgument("must be an object", rf);
      int64_t batch = 1;
      if (rep.contains("batch")) {
        if (!rep["batch"].is_number_integer() || rep["batch"].get<int64_t>() < 0) {
          return InvalidArgument("must be an integer >= 0", rf + ".batch");
        }
        batch = rep["batch"].get<int64_t>();
      }
      if (!rep.contains("stages") || !rep["stages"].is_array()) {
        return InvalidArgument("must be an array of stages", rf + ".stages");
      }
      for (size_t s = 0; s < rep["stages"].size(); ++s) {
        const json& st = rep["stages"][s];
        const std::string sf = rf + ".stages[" + std::to_string(s) + "].rank";
        if (!st.is_object() || !st.contains("rank") || !st["rank"].is_number_integer()) {
          return InvalidArgument("must be an integer", sf);
        }
        const int64_t rank = st["rank"].get<int64_t>();
        if (rank < 0 || rank >= world_size) {
          return InvalidArgument("rank " + std::to_string(rank) + " outside world of size " +
                                     std::to_string(world_size),
                                 sf);
        }
        plan.rank_weights[static_cast<size_t>(rank)] = batch;
      }
    }
  }
  auto tiling = doc.find("tiling");
  if (tiling != doc.end() && !tiling->is_null()) {
    if (!tiling->is_object()) return InvalidArgument("must be an object", "tiling");
    TileSpec spec;
    for (auto [key, dst] : {std::pair<const char*, int64_t*>{"tile_px", &spec.tile_px},
                            std::pair<const char*, int64_t*>{"overlap_px", &spec.overlap_px}}) {
      auto v = tiling->find(key);
      if (v == tiling->end() || !v->is_number_integer() || v->get<int64_t>() < 0) {
        return InvalidArgument("must be an integer >= 0", std::string("tiling.") + key);
      }
      *dst = v->get<int64_t>();
    }
    if (spec.tile_px <= 0) return InvalidArgument("must be positive", "tiling.tile_px");
    plan.tiling = spec;
  }
  return plan;
}

}  // namespace tessera::worker
