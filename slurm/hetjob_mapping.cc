#include "slurm/hetjob_mapping.h"

#include <algorithm>

namespace tessera::slurm {

Result<HetJobMapping> MapRanks(const std::vector<RankSlot>& ranks,
                               const std::map<std::string, std::vector<std::string>>& types) {
  const int64_t world = static_cast<int64_t>(ranks.size());
  if (world == 0) return InvalidArgument("an attempt needs at least one rank", "ranks");
  std::vector<const RankSlot*> by_rank(static_cast<size_t>(world), nullptr);
  for (const RankSlot& r : ranks) {
    if (r.rank < 0 || r.rank >= world || by_rank[static_cast<size_t>(r.rank)] != nullptr) {
      return InvalidArgument("ranks must be 0.." + std::to_string(world - 1) + ", each once",
                             "ranks");
    }
    by_rank[static_cast<size_t>(r.rank)] = &r;
  }

  // Per node, in order of its first rank: its ranks and GPUs per type.
  struct NodeUse {
    std::string name;
    std::vector<int64_t> ranks;
    std::map<std::string, int64_t> gpus;  // type -> count
  };
  std::vector<NodeUse> nodes;
  std::map<std::string, size_t> node_index;
  for (int64_t rank = 0; rank < world; ++rank) {
    const RankSlot& r = *by_rank[static_cast<size_t>(rank)];
    const std::string field = "ranks[" + std::to_string(rank) + "].devices";
    auto t = types.find(r.node);
    if (t == types.end()) return InvalidArgument("unknown node " + r.node, field);
    auto [it, added] = node_index.try_emplace(r.node, nodes.size());
    if (added) nodes.push_back(NodeUse{r.node, {}, {}});
    NodeUse& use = nodes[it->second];
    use.ranks.push_back(rank);
    for (int64_t d : r.devices) {
      if (d < 0 || d >= static_cast<int64_t>(t->second.size())) {
        return InvalidArgument("node " + r.node + " has no device " + std::to_string(d), field);
      }
      ++use.gpus[t->second[static_cast<size_t>(d)]];
    }
  }

  HetJobMapping out;
  out.ranks.resize(static_cast<size_t>(world));
  std::map<std::pair<std::string, int64_t>, size_t> component_of;  // (gres, tasks) -> index
  for (const NodeUse& use : nodes) {
    std::string gres;
    for (const auto& [type, count] : use.gpus) {
      gres += (gres.empty() ? "" : ",") + std::string("gpu:") + (type.empty() ? "" : type + ":") +
              std::to_string(count);
    }
    const int64_t tasks = static_cast<int64_t>(use.ranks.size());
    auto [it, added] = component_of.try_emplace({gres, tasks}, out.components.size());
    if (added) out.components.push_back(Component{{}, tasks, gres});
    out.components[it->second].nodes.push_back(use.name);
    for (size_t i = 0; i < use.ranks.size(); ++i) {
      out.ranks[static_cast<size_t>(use.ranks[i])] =
          RankPlace{static_cast<int64_t>(it->second), use.name, static_cast<int64_t>(i)};
    }
  }
  return out;
}

std::optional<int64_t> RankAt(const HetJobMapping& mapping, const std::string& node,
                              int64_t local) {
  for (size_t r = 0; r < mapping.ranks.size(); ++r) {
    if (mapping.ranks[r].node == node && mapping.ranks[r].local == local) {
      return static_cast<int64_t>(r);
    }
  }
  return std::nullopt;
}

api::Json ToJson(const HetJobMapping& mapping) {
  api::Json components = api::Json::array();
  for (const Component& c : mapping.components) {
    components.push_back(
        {{"nodes", c.nodes}, {"tasks_per_node", c.tasks_per_node}, {"gres", c.gres}});
  }
  api::Json ranks = api::Json::array();
  for (const RankPlace& r : mapping.ranks) {
    ranks.push_back({{"component", r.component}, {"node", r.node}, {"local", r.local}});
  }
  return {{"components", components}, {"ranks", ranks}};
}

Result<HetJobMapping> HetJobMappingFromJson(const api::Json& j) {
  HetJobMapping m;
  try {
    for (const auto& c : j.at("components")) {
      m.components.push_back(Component{c.at("nodes").get<std::vector<std::string>>(),
                                       c.at("tasks_per_node").get<int64_t>(),
                                       c.at("gres").get<std::string>()});
    }
    for (const auto& r : j.at("ranks")) {
      m.ranks.push_back(RankPlace{r.at("component").get<int64_t>(), r.at("node").get<std::string>(),
                                  r.at("local").get<int64_t>()});
    }
  } catch (const api::Json::exception& e) {
    return InvalidArgument(std::string("not a hetjob mapping: ") + e.what(), "mapping");
  }
  return m;
}

}  // namespace tessera::slurm
