#include "daemon/controller/infer_growth.h"

#include <algorithm>
#include <map>

#include "common/quantities.h"

namespace tessera::daemon {
namespace {

std::string DeviceOf(const RankLaunch& r) { return r.node + ":" + std::to_string(r.device_index); }

// The rank's LOCAL_RANK, as the agent orders a node's ranks by it
// (launch/worker_env.h: RANK stands in where it is absent or malformed).
int64_t LocalRankOf(const RankLaunch& r) {
  auto it = r.launch.env.find("LOCAL_RANK");
  if (it == r.launch.env.end()) return r.launch.key.rank;
  return ParseWholeNumber(it->second).value_or(r.launch.key.rank);
}

// The LOCAL_RANK L that puts a new rank (numbered after all of `siblings`, its
// node's live ranks of the attempt) at position L when the agent sorts the
// node's ranks by (LOCAL_RANK, RANK): the smallest L with exactly L siblings
// at or below it. One exists within 0..siblings.size(): the count at or below
// L, less L, starts >= 0, ends <= 0 and falls by at most one a step.
int64_t JoiningLocalRank(std::vector<int64_t> siblings) {
  std::sort(siblings.begin(), siblings.end());
  const auto n = static_cast<int64_t>(siblings.size());
  for (int64_t l = 0; l < n; ++l) {
    if (std::upper_bound(siblings.begin(), siblings.end(), l) - siblings.begin() == l) return l;
  }
  return n;
}

}  // namespace

Result<GrownInfer> JoinInferRanks(const AttemptLaunch& old, const std::set<int64_t>& dropped,
                                  const AttemptLaunch& fresh,
                                  const std::vector<std::string>& devices) {
  if (!old.infer || old.ranks.empty()) {
    return InvalidArgument("only an infer attempt with a rank takes new ranks", "infer");
  }
  if (fresh.job_id != old.job_id || fresh.attempt != old.attempt) {
    return InvalidArgument("the wider launch is of another job or attempt", "attempt");
  }
  if (!old.rank_plan.is_object() || (!old.plan.is_object() && !old.plan.is_null())) {
    return InvalidArgument("the attempt's plan is not an object", "plan");
  }
  const api::Json none = api::Json::array();
  const api::Json& fresh_rank_replicas =
      fresh.rank_plan.is_object() ? fresh.rank_plan.value("replicas", none) : none;
  const api::Json& fresh_plan_replicas =
      fresh.plan.is_object() ? fresh.plan.value("replicas", none) : none;

  GrownInfer out;
  AttemptLaunch& grown = out.launch;
  grown = old;
  if (!grown.plan.is_object()) grown.plan = api::Json::object();
  if (!grown.rank_plan.contains("replicas")) grown.rank_plan["replicas"] = api::Json::array();
  if (!grown.plan.contains("replicas")) grown.plan["replicas"] = api::Json::array();

  // The devices live ranks hold, and the live ranks each node will run.
  std::set<std::string> held;
  std::map<std::string, int64_t> on_node;
  for (const RankLaunch& r : old.ranks) {
    if (dropped.contains(r.launch.key.rank)) continue;
    held.insert(DeviceOf(r));
    ++on_node[r.node];
  }
  std::map<std::string, size_t> fresh_rank;  // device -> its rank in `fresh`
  for (size_t i = 0; i < fresh.ranks.size(); ++i) fresh_rank[DeviceOf(fresh.ranks[i])] = i;
  for (const std::string& device : devices) {
    auto f = fresh_rank.find(device);
    if (f == fresh_rank.end()) {
      return InvalidArgument("device " + device + " is not in the wider plan", "devices");
    }
    ++on_node[fresh.ranks[f->second].node];
  }
  const auto world = static_cast<int64_t>(old.ranks.size() + devices.size());
  const auto& master = old.ranks.front().launch.env;

  for (const std::string& device : devices) {
    if (!held.insert(device).second) {
      return InvalidArgument("device " + device + " already runs a rank of the attempt", "devices");
    }
    const size_t i = fresh_rank.at(device);
    if (i >= fresh_rank_replicas.size() || !fresh_rank_replicas[i].is_object() ||
        fresh_rank_replicas[i].value("stages", none).size() != 1) {
      return InvalidArgument("the wider plan's replica on " + device + " is not one stage", "plan");
    }
    RankLaunch joining = fresh.ranks[i];
    const auto rank = static_cast<int64_t>(grown.ranks.size());
    std::vector<int64_t> siblings;
    for (const RankLaunch& r : grown.ranks) {
      if (!dropped.contains(r.launch.key.rank) && r.node == joining.node) {
        siblings.push_back(LocalRankOf(r));
      }
    }
    api::WorkerLaunch& l = joining.launch;
    l.key = {old.job_id, old.attempt, rank};
    l.reform = nullptr;
    l.env["RANK"] = std::to_string(rank);
    l.env["ROLE_RANK"] = l.env["RANK"];
    l.env["WORLD_SIZE"] = std::to_string(world);
    l.env["ROLE_WORLD_SIZE"] = l.env["WORLD_SIZE"];
    l.env["LOCAL_RANK"] = std::to_string(JoiningLocalRank(siblings));
    l.env["LOCAL_WORLD_SIZE"] = std::to_string(on_node.at(joining.node));
    for (const char* name : {"MASTER_ADDR", "MASTER_PORT"}) {
      if (auto m = master.find(name); m != master.end()) {
        l.env[name] = m->second;
      } else {
        l.env.erase(name);
      }
    }
    api::Json rank_replica = fresh_rank_replicas[i];
    rank_replica["stages"][0]["rank"] = rank;
    grown.rank_plan["replicas"].push_back(std::move(rank_replica));
    if (i < fresh_plan_replicas.size()) grown.plan["replicas"].push_back(fresh_plan_replicas[i]);
    out.joined.push_back(rank);
    grown.ranks.push_back(std::move(joining));
  }
  grown.plan["dp"] = grown.plan["replicas"].size();
  for (RankLaunch& r : grown.ranks) r.launch.plan = grown.rank_plan;
  return out;
}

}  // namespace tessera::daemon
