#include "daemon/controller/train_reform.h"

#include <algorithm>
#include <map>

#include "api/entrypoint_kind.h"
#include "daemon/controller/job_controller_util.h"

namespace tessera::daemon {

std::optional<std::string> ReformBlocker(const api::JobSpec& spec, const AttemptLaunch& launch) {
  if (spec.kind != api::JobKind::kTrain || launch.infer) return "not a train job";
  const api::EntrypointKind kind = api::EntrypointKindOf(spec.entrypoint);
  if (kind == api::EntrypointKind::kCommand || kind == api::EntrypointKind::kUnknown) {
    return "the job runs its own script, which cannot re-form its process group";
  }
  if (kind == api::EntrypointKind::kBuiltin &&
      api::EntrypointId(spec.entrypoint) == "gan-pix2pix") {
    return "gan-pix2pix cannot re-form its process group";
  }
  if (!launch.rank_plan.is_object() ||
      launch.rank_plan.value("replicas", api::Json::array()).empty()) {
    return "the attempt's plan names no layers";
  }
  return std::nullopt;
}

std::optional<std::string> OrphanLayers(const AttemptLaunch& launch,
                                        const std::set<int64_t>& lost) {
  std::map<int64_t, bool> owned;  // layer -> held by a survivor
  if (!launch.rank_plan.is_object()) return std::nullopt;
  for (const auto& replica : launch.rank_plan.value("replicas", api::Json::array())) {
    for (const auto& stage : replica.value("stages", api::Json::array())) {
      const auto layers = stage.value("layers", api::Json::array());
      if (!layers.is_array() || layers.size() != 2) continue;
      const bool survives = !lost.contains(stage.value("rank", int64_t{-1}));
      for (int64_t l = layers[0].get<int64_t>(); l < layers[1].get<int64_t>(); ++l) {
        owned[l] = owned[l] || survives;
      }
    }
  }
  std::vector<int64_t> orphans;
  for (const auto& [layer, survives] : owned) {
    if (!survives) orphans.push_back(layer);
  }
  if (orphans.empty()) return std::nullopt;
  const bool range = orphans.back() - orphans.front() + 1 == static_cast<int64_t>(orphans.size());
  if (orphans.size() == 1) return std::to_string(orphans.front());
  if (range) return std::to_string(orphans.front()) + "-" + std::to_string(orphans.back());
  std::string out;
  for (int64_t l : orphans) out += (out.empty() ? "" : ",") + std::to_string(l);
  return out;
}

int64_t NextReformGeneration(const AttemptLaunch& launch) {
  int64_t newest = 0;
  for (const RankLaunch& r : launch.ranks) {
    if (r.launch.reform.is_object()) {
      newest = std::max(newest, r.launch.reform.value("generation", int64_t{0}));
    }
  }
  return newest + 1;
}

std::optional<int64_t> AllStepsDoneIn(const api::Job& job, const api::WorkerStatus& w) {
  const std::optional<int64_t> step = ProgressInt(w.progress, "step");
  if (job.spec.steps <= 0 || !step || *step < job.spec.steps) return std::nullopt;
  return ProgressInt(w.progress, "generation").value_or(0);
}

Result<ReformedRanks> ReformRanks(const AttemptLaunch& old, const std::set<int64_t>& survivors,
                                  const AttemptLaunch& fresh, int64_t generation) {
  ReformedRanks out;
  out.launch = old;
  out.launch.plan = fresh.plan;
  out.launch.rank_plan = fresh.rank_plan;
  std::set<int64_t> given;
  for (const RankLaunch& f : fresh.ranks) {
    const api::Json reform = {
        {"generation", generation}, {"env", f.launch.env}, {"plan", fresh.rank_plan}};
    auto it =
        std::find_if(out.launch.ranks.begin(), out.launch.ranks.end(), [&](const RankLaunch& r) {
          return survivors.contains(r.launch.key.rank) && r.node == f.node &&
                 r.device_index == f.device_index;
        });
    if (it == out.launch.ranks.end()) {
      RankLaunch joining = f;
      joining.launch.key.rank = static_cast<int64_t>(out.launch.ranks.size());
      joining.launch.reform = reform;
      out.joined.push_back(joining.launch.key.rank);
      out.launch.ranks.push_back(std::move(joining));
      continue;
    }
    given.insert(it->launch.key.rank);
    // The running process keeps its key and argv; its env now says where it
    // stands, so a restarted controller hands the same.
    for (const auto& [k, v] : f.launch.env) it->launch.env[k] = v;
    it->launch.plan = fresh.rank_plan;
    it->launch.reform = reform;
  }
  for (RankLaunch& r : out.launch.ranks) {
    const int64_t rank = r.launch.key.rank;
    if (!survivors.contains(rank) || given.contains(rank)) continue;
    out.unused.push_back(rank);
    // Told it has no place, it leaves at once rather than waiting for a stop
    // in a collective of the world the kept ranks leave.
    r.launch.reform = {{"generation", generation}, {"left_out", true}};
  }
  return out;
}

}  // namespace tessera::daemon
