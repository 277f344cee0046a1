#include "worker/runtime/plan.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "common/json_fields.h"

namespace tessera::worker {

using nlohmann::json;

Result<json> ParsePlanDocument(std::string_view json_text) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("plan is not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) return InvalidArgument("plan must be a JSON object");
  return doc;
}

Result<Plan> ParsePlan(std::string_view json_text) {
  TESSERA_ASSIGN_OR_RETURN(json doc, ParsePlanDocument(json_text));
  Plan plan;
  JsonFields fields(doc);
  // A training plan: the planner's tiled layout is for inference (infer_plan.h).
  std::string layout;
  TESSERA_RETURN_IF_ERROR(fields.String("layout", &layout));
  const std::optional<Layout> parsed_layout = scheduler::ParseLayout(layout);
  if (!parsed_layout || (*parsed_layout != Layout::kData && *parsed_layout != Layout::kPipeline &&
                         *parsed_layout != Layout::kHybrid)) {
    return InvalidArgument("must be \"data\", \"pipeline\" or \"hybrid\", got \"" + layout + "\"",
                           "layout");
  }
  plan.layout = *parsed_layout;
  TESSERA_RETURN_IF_ERROR(fields.Int("global_batch", &plan.global_batch, Presence::kRequired));
  TESSERA_RETURN_IF_ERROR(fields.Int("micro_batches", &plan.micro_batches));
  std::string schedule(ScheduleName(plan.schedule));
  TESSERA_RETURN_IF_ERROR(fields.String("schedule", &schedule));
  const std::optional<Schedule> parsed_schedule = scheduler::ParseSchedule(schedule);
  if (!parsed_schedule) {
    return InvalidArgument("must be \"gpipe\" or \"1f1b\", got \"" + schedule + "\"", "schedule");
  }
  plan.schedule = *parsed_schedule;
  auto replicas = doc.find("replicas");
  if (replicas == doc.end() || !replicas->is_array()) {
    return InvalidArgument("must be an array of replicas", "replicas");
  }
  for (size_t r = 0; r < replicas->size(); ++r) {
    const json& rep = (*replicas)[r];
    const std::string rf = "replicas[" + std::to_string(r) + "]";
    if (!rep.is_object()) return InvalidArgument("must be an object", rf);
    ReplicaPlan rp;
    TESSERA_RETURN_IF_ERROR(JsonFields(rep, rf).Int("batch", &rp.batch, Presence::kRequired));
    auto stages = rep.find("stages");
    if (stages == rep.end() || !stages->is_array()) {
      return InvalidArgument("must be an array of stages", rf + ".stages");
    }
    for (size_t s = 0; s < stages->size(); ++s) {
      const json& st = (*stages)[s];
      const std::string sf = rf + ".stages[" + std::to_string(s) + "]";
      if (!st.is_object()) return InvalidArgument("must be an object", sf);
      StagePlan sp;
      JsonFields stage(st, sf);
      int64_t rank = 0;
      TESSERA_RETURN_IF_ERROR(stage.Int("rank", &rank, Presence::kRequired));
      sp.rank = static_cast<int>(rank);
      auto layers = st.find("layers");
      if (layers == st.end() || !layers->is_array() || layers->size() != 2 ||
          !(*layers)[0].is_number_integer() || !(*layers)[1].is_number_integer()) {
        return InvalidArgument("must be [begin, end] integers", sf + ".layers");
      }
      sp.layer_begin = (*layers)[0].get<int64_t>();
      sp.layer_end = (*layers)[1].get<int64_t>();
      TESSERA_RETURN_IF_ERROR(stage.Int("peak_memory_bytes", &sp.predicted_peak_bytes));
      rp.stages.push_back(sp);
    }
    plan.replicas.push_back(std::move(rp));
  }
  return plan;
}

Status ValidatePlan(const Plan& plan, int world_size, int64_t num_layers) {
  if (plan.global_batch <= 0) return InvalidArgument("must be positive", "global_batch");
  if (plan.micro_batches <= 0) return InvalidArgument("must be positive", "micro_batches");
  if (plan.replicas.empty()) return InvalidArgument("needs at least one replica", "replicas");
  if (num_layers <= 0) return InvalidArgument("model has no layers");
  int64_t batch_sum = 0;
  std::set<int> seen;
  for (size_t r = 0; r < plan.replicas.size(); ++r) {
    const ReplicaPlan& rep = plan.replicas[r];
    const std::string rf = "replicas[" + std::to_string(r) + "]";
    if (rep.batch <= 0) return InvalidArgument("must be positive", rf + ".batch");
    batch_sum += rep.batch;
    if (rep.stages.empty()) return InvalidArgument("needs at least one stage", rf + ".stages");
    int64_t expect = 0;
    for (size_t s = 0; s < rep.stages.size(); ++s) {
      const StagePlan& st = rep.stages[s];
      const std::string sf = rf + ".stages[" + std::to_string(s) + "]";
      if (st.rank < 0 || st.rank >= world_size) {
        return InvalidArgument("rank " + std::to_string(st.rank) + " outside world of size " +
                                   std::to_string(world_size),
                               sf + ".rank");
      }
      if (!seen.insert(st.rank).second) {
        return InvalidArgument("rank " + std::to_string(st.rank) + " appears twice", sf + ".rank");
      }
      if (st.layer_begin != expect) {
        return InvalidArgument("layers must start at " + std::to_string(expect) +
                                   " (stages cover the model contiguously)",
                               sf + ".layers");
      }
      if (st.layer_end <= st.layer_begin) {
        return InvalidArgument("empty or reversed layer range", sf + ".layers");
      }
      if (st.layer_end > num_layers) {
        return InvalidArgument(
            "layer range ends past the model's " + std::to_string(num_layers) + " layers",
            sf + ".layers");
      }
      expect = st.layer_end;
    }
    if (expect != num_layers) {
      return InvalidArgument("stages cover layers [0, " + std::to_string(expect) +
                                 ") but the model has " + std::to_string(num_layers),
                             rf + ".stages");
    }
  }
  if (batch_sum != plan.global_batch) {
    return InvalidArgument("replica batch shares sum to " + std::to_string(batch_sum) +
                               ", not global_batch " + std::to_string(plan.global_batch),
                           "replicas");
  }
  if (static_cast<int>(seen.size()) != world_size) {
    return InvalidArgument("plan names " + std::to_string(seen.size()) +
                               " ranks but WORLD_SIZE is " + std::to_string(world_size),
                           "replicas");
  }
  if (plan.layout == Layout::kData) {
    for (size_t r = 0; r < plan.replicas.size(); ++r) {
      if (plan.replicas[r].stages.size() != 1) {
        return InvalidArgument("layout \"data\" needs exactly one stage per replica",
                               "replicas[" + std::to_string(r) + "].stages");
      }
    }
  }
  if (plan.layout == Layout::kPipeline && plan.replicas.size() != 1) {
    return InvalidArgument("layout \"pipeline\" needs exactly one replica", "replicas");
  }
  return Status::Ok();
}

Plan SingleProcessPlan(int64_t global_batch, int64_t micro_batches, int64_t num_layers) {
  Plan plan;
  plan.layout = Layout::kData;
  plan.global_batch = global_batch;
  plan.micro_batches = micro_batches;
  plan.replicas.push_back(ReplicaPlan{global_batch, {StagePlan{0, 0, num_layers}}});
  return plan;
}

Result<RankRole> RoleForRank(const Plan& plan, int rank) {
  int64_t offset = 0;
  for (size_t r = 0; r < plan.replicas.size(); ++r) {
    const ReplicaPlan& rep = plan.replicas[r];
    for (size_t s = 0; s < rep.stages.size(); ++s) {
      if (rep.stages[s].rank != rank) continue;
      RankRole role;
      role.replica = static_cast<int>(r);
      role.stage = static_cast<int>(s);
      role.num_stages = static_cast<int>(rep.stages.size());
      role.layer_begin = rep.stages[s].layer_begin;
      role.layer_end = rep.stages[s].layer_end;
      role.prev_rank = s > 0 ? rep.stages[s - 1].rank : -1;
      role.next_rank = s + 1 < rep.stages.size() ? rep.stages[s + 1].rank : -1;
      role.replica_batch = rep.batch;
      role.sample_offset = offset;
      role.predicted_peak_bytes = rep.stages[s].predicted_peak_bytes;
      return role;
    }
    offset += rep.batch;
  }
  return NotFound("rank " + std::to_string(rank) + " has no stage in the plan");
}

std::vector<OwnerGroup> LayerOwnerGroups(const Plan& plan, int64_t num_layers) {
  std::vector<OwnerGroup> groups;
  std::map<std::vector<int>, size_t> index;
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    std::vector<int> owners;
    for (const ReplicaPlan& rep : plan.replicas) {
      for (const StagePlan& st : rep.stages) {
        if (layer >= st.layer_begin && layer < st.layer_end) owners.push_back(st.rank);
      }
    }
    auto [it, inserted] = index.emplace(owners, groups.size());
    if (inserted) groups.push_back(OwnerGroup{owners, {}});
    groups[it->second].layers.push_back(layer);
  }
  return groups;
}

bool OwnerGroupsShareStagePositions(const Plan& plan, int64_t num_layers) {
  for (const OwnerGroup& g : LayerOwnerGroups(plan, num_layers)) {
    std::set<std::pair<int, int>> positions;
    for (int rank : g.ranks) {
      auto role = RoleForRank(plan, rank);
      if (!role.ok()) return false;
      positions.emplace(role->stage, role->num_stages);
    }
    if (positions.size() > 1) return false;
  }
  return true;
}

int64_t EffectiveMicroBatches(const Plan& plan) {
  int64_t m = plan.micro_batches;
  for (const ReplicaPlan& rep : plan.replicas) m = std::min(m, rep.batch);
  return std::max<int64_t>(m, 1);
}

std::vector<int64_t> SplitMicroBatches(int64_t batch, int64_t parts) {
  parts = std::max<int64_t>(1, std::min(parts, batch));
  std::vector<int64_t> out(static_cast<size_t>(parts), batch / parts);
  for (int64_t i = 0; i < batch % parts; ++i) out[static_cast<size_t>(i)] += 1;
  return out;
}

}  // namespace tessera::worker
