// Hetjob mapping: a Tessera attempt's ranks -> the components of one
// heterogeneous Slurm job, and back (which rank a Slurm task is).
//
// Each node of the attempt hosts some ranks on some of its GPUs. Nodes whose
// requests are identical — the same GPUs per type ("gpu:a100:2") and the same
// number of ranks — form one component, which asks Slurm for exactly those
// nodes (nodelist), that many tasks per node and that GRES per node. A node
// belongs to one component only. Components are ordered by the lowest rank
// they host (component 0 holds rank 0, the rendezvous host); a component's
// nodes likewise.
//
// Back: a Slurm task knows its node (SLURMD_NODENAME) and its index among the
// step's tasks on that node (SLURM_LOCALID); the node's ranks in rank order
// are its tasks in order, so RankAt needs nothing else (whatever Slurm's task
// distribution or the numbering of SLURM_PROCID across components).
//
// Thread safety: pure functions.
#ifndef TESSERA_SLURM_HETJOB_MAPPING_H_
#define TESSERA_SLURM_HETJOB_MAPPING_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/types.h"
#include "common/status.h"

namespace tessera::slurm {

// One rank of an attempt: where it runs.
struct RankSlot {
  int64_t rank = 0;
  std::string node;
  std::vector<int64_t> devices;  // indices of the node's devices
};

struct Component {
  std::vector<std::string> nodes;
  int64_t tasks_per_node = 0;
  std::string gres;  // per node, "gpu:a100:2" or "gpu:a100:1,gpu:t4:1"; "" without GPUs
  friend bool operator==(const Component&, const Component&) = default;
};

struct RankPlace {
  int64_t component = 0;
  std::string node;
  int64_t local = 0;  // SLURM_LOCALID of its task
  friend bool operator==(const RankPlace&, const RankPlace&) = default;
};

struct HetJobMapping {
  std::vector<Component> components;
  std::vector<RankPlace> ranks;  // index == rank
};

// `types`: each node's GPU type per device index. kInvalidArgument when the
// ranks are not 0..n-1 once each ("ranks"), or name a node or device index
// `types` lacks ("ranks[i].devices").
Result<HetJobMapping> MapRanks(const std::vector<RankSlot>& ranks,
                               const std::map<std::string, std::vector<std::string>>& types);

// The rank of the task `local` on `node`; nullopt when there is none.
std::optional<int64_t> RankAt(const HetJobMapping& mapping, const std::string& node, int64_t local);

api::Json ToJson(const HetJobMapping& mapping);
Result<HetJobMapping> HetJobMappingFromJson(const api::Json& j);

}  // namespace tessera::slurm

#endif  // TESSERA_SLURM_HETJOB_MAPPING_H_
