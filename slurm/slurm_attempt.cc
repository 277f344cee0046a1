#include "slurm/slurm_attempt.h"

#include <algorithm>
#include <sstream>

#include "common/quantities.h"

namespace tessera::slurm {
namespace {

// A shell word: single-quoted, quotes inside closed and escaped.
std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::optional<int64_t> ParseInt(std::string_view s) {
  std::optional<int64_t> v = ParseWholeNumber(s);
  if (!v || *v <= 0) return std::nullopt;
  return v;
}

}  // namespace

std::string JobName(api::JobId job, int64_t attempt) {
  return "tessera-" + std::to_string(job) + "-" + std::to_string(attempt);
}

std::optional<std::pair<api::JobId, int64_t>> ParseJobName(const std::string& name) {
  constexpr std::string_view kPrefix = "tessera-";
  if (name.rfind(kPrefix, 0) != 0) return std::nullopt;
  std::string_view rest(name);
  rest.remove_prefix(kPrefix.size());
  auto dash = rest.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  auto job = ParseInt(rest.substr(0, dash));
  auto attempt = ParseInt(rest.substr(dash + 1));
  if (!job || !attempt) return std::nullopt;
  return std::pair<api::JobId, int64_t>(*job, *attempt);
}

std::filesystem::path AttemptDir(const std::string& rank_root, api::JobId job, int64_t attempt) {
  return std::filesystem::path(rank_root) / "jobs" / std::to_string(job) / std::to_string(attempt);
}

api::Json ToJson(const SlurmAttempt& a) {
  api::HeartbeatResponse launches;
  launches.desired = a.launches;
  api::Json nodes = api::Json::object();
  for (const auto& [name, node] : a.nodes) nodes[name] = api::ToJson(node);
  return {{"job_id", a.job_id},
          {"attempt", a.attempt},
          {"mapping", ToJson(a.mapping)},
          {"launches", api::ToJson(launches)},
          {"nodes", nodes},
          {"rank_root", a.rank_root}};
}

Result<SlurmAttempt> SlurmAttemptFromJson(const api::Json& j) {
  SlurmAttempt a;
  if (!j.is_object()) return InvalidArgument("must be an object", "attempt");
  try {
    a.job_id = j.at("job_id").get<api::JobId>();
    a.attempt = j.at("attempt").get<int64_t>();
    a.rank_root = j.at("rank_root").get<std::string>();
  } catch (const api::Json::exception& e) {
    return InvalidArgument(std::string("not a Slurm attempt: ") + e.what(), "attempt");
  }
  TESSERA_ASSIGN_OR_RETURN(a.mapping, HetJobMappingFromJson(j.value("mapping", api::Json())));
  TESSERA_ASSIGN_OR_RETURN(api::HeartbeatResponse launches,
                           api::HeartbeatResponseFromJson(j.value("launches", api::Json())));
  a.launches = std::move(launches.desired);
  if (a.launches.size() != a.mapping.ranks.size()) {
    return InvalidArgument("launches and mapping disagree on the ranks", "launches");
  }
  const api::Json nodes = j.value("nodes", api::Json::object());
  if (!nodes.is_object()) return InvalidArgument("must be an object", "nodes");
  for (const auto& [name, node] : nodes.items()) {
    TESSERA_ASSIGN_OR_RETURN(a.nodes[name], api::NodeFromJson(node));
  }
  return a;
}

Result<SlurmAttempt> AttemptOf(std::vector<api::WorkerLaunch> launches,
                               const std::map<int64_t, std::string>& rank_nodes,
                               const std::map<std::string, api::Node>& nodes,
                               const std::string& rank_root) {
  if (launches.empty()) return InvalidArgument("an attempt needs ranks", "launches");
  std::sort(launches.begin(), launches.end(),
            [](const auto& a, const auto& b) { return a.key.rank < b.key.rank; });
  SlurmAttempt a;
  a.job_id = launches.front().key.job_id;
  a.attempt = launches.front().key.attempt;
  a.rank_root = rank_root;
  std::vector<RankSlot> slots;
  std::map<std::string, std::vector<std::string>> types;
  for (const api::WorkerLaunch& l : launches) {
    auto where = rank_nodes.find(l.key.rank);
    if (where == rank_nodes.end()) {
      return InvalidArgument("rank " + std::to_string(l.key.rank) + " has no node", "launches");
    }
    auto node = nodes.find(where->second);
    if (node == nodes.end()) return InvalidArgument("unknown node " + where->second, "launches");
    a.nodes[node->first] = node->second;
    std::vector<std::string>& t = types[node->first];
    t.clear();
    for (const api::Device& d : node->second.devices) t.push_back(d.name);
    slots.push_back(RankSlot{l.key.rank, node->first, l.device_indices});
  }
  TESSERA_ASSIGN_OR_RETURN(a.mapping, MapRanks(slots, types));
  a.launches = std::move(launches);
  return a;
}

HetJobRequest BuildHetJobRequest(const SlurmAttempt& attempt, const std::string& attempt_file,
                                 const std::string& launcher, const std::string& partition) {
  HetJobRequest r;
  r.name = JobName(attempt.job_id, attempt.attempt);
  const std::filesystem::path dir = AttemptDir(attempt.rank_root, attempt.job_id, attempt.attempt);
  r.working_dir = dir.string();
  r.standard_output = (dir / "slurm-%j.out").string();
  std::ostringstream script;
  script << "#!/bin/sh\n"
         << "# Tessera job " << attempt.job_id << ", attempt " << attempt.attempt << ": "
         << attempt.launches.size() << " ranks in " << attempt.mapping.components.size()
         << " components\n"
         << "exec srun --kill-on-bad-exit=1";
  for (size_t i = 0; i < attempt.mapping.components.size(); ++i) {
    const Component& c = attempt.mapping.components[i];
    JobComponent jc;
    jc.partition = partition;
    jc.nodelist = c.nodes;
    jc.tasks_per_node = c.tasks_per_node;
    jc.gres = c.gres;
    jc.environment = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}};
    r.components.push_back(std::move(jc));
    if (i > 0) script << " :";
    // srun refuses --het-group in a job that is not heterogeneous.
    if (attempt.mapping.components.size() > 1) script << " --het-group=" << i;
    script << " -n " << static_cast<int64_t>(c.nodes.size()) * c.tasks_per_node
           << " --ntasks-per-node=" << c.tasks_per_node << " -m block " << Quote(launcher) << " "
           << Quote(attempt_file);
  }
  script << "\n";
  r.script = script.str();
  return r;
}

}  // namespace tessera::slurm
