#include "worker/runtime/infer_plan.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/json_fields.h"
#include "worker/runtime/plan.h"

namespace tessera::worker {

using nlohmann::json;

Result<InferPlan> ParseInferPlan(const std::string& json_text, int world_size) {
  TESSERA_ASSIGN_OR_RETURN(json doc, ParsePlanDocument(json_text));
  InferPlan plan;
  plan.rank_weights.assign(static_cast<size_t>(std::max(1, world_size)), 0);
  JsonFields fields(doc);
  std::string layout(LayoutName(plan.layout));
  TESSERA_RETURN_IF_ERROR(fields.String("layout", &layout));
  const std::optional<Layout> parsed_layout = scheduler::ParseLayout(layout);
  if (!parsed_layout) {
    return InvalidArgument("must be auto, data, pipeline, hybrid or tiled, got \"" + layout + "\"",
                           "layout");
  }
  plan.layout = *parsed_layout;
  TESSERA_ASSIGN_OR_RETURN(const json* replicas, fields.Array("replicas"));
  if (replicas != nullptr) {
    for (size_t r = 0; r < replicas->size(); ++r) {
      const json& rep = (*replicas)[r];
      JsonFields replica(rep, "replicas[" + std::to_string(r) + "]");
      TESSERA_RETURN_IF_ERROR(replica.CheckObject());
      int64_t batch = 1;
      TESSERA_RETURN_IF_ERROR(replica.Int("batch", &batch));
      if (batch < 0) return InvalidArgument("must be an integer >= 0", replica.Name("batch"));
      TESSERA_ASSIGN_OR_RETURN(const json* stages, replica.Array("stages", Presence::kRequired));
      for (size_t s = 0; s < stages->size(); ++s) {
        JsonFields stage((*stages)[s], replica.Name("stages[" + std::to_string(s) + "]"));
        const std::string sf = stage.Name("rank");
        int64_t rank = 0;
        TESSERA_RETURN_IF_ERROR(stage.Int("rank", &rank, Presence::kRequired));
        if (rank < 0 || rank >= world_size) {
          return InvalidArgument("rank " + std::to_string(rank) + " outside world of size " +
                                     std::to_string(world_size),
                                 sf);
        }
        plan.rank_weights[static_cast<size_t>(rank)] = batch;
      }
    }
  }
  json tiling;
  TESSERA_RETURN_IF_ERROR(fields.Raw("tiling", &tiling));
  if (!tiling.is_null()) {
    JsonFields tile(tiling, "tiling");
    if (!tiling.is_object()) return InvalidArgument("must be an object", "tiling");
    TileSpec spec;
    for (auto [key, dst] : {std::pair<const char*, int64_t*>{"tile_px", &spec.tile_px},
                            std::pair<const char*, int64_t*>{"overlap_px", &spec.overlap_px}}) {
      TESSERA_RETURN_IF_ERROR(tile.Int(key, dst, Presence::kRequired));
      if (*dst < 0) return InvalidArgument("must be an integer >= 0", tile.Name(key));
    }
    if (spec.tile_px <= 0) return InvalidArgument("must be positive", "tiling.tile_px");
    plan.tiling = spec;
  }
  return plan;
}

}  // namespace tessera::worker
