#include "daemon/store.h"

#include <algorithm>
#include <set>

namespace tessera::daemon {

Status ValidateNodeHealth(std::string_view health) {
  if (health == "healthy" || health == "suspect" || health == "dead") return Status::Ok();
  return InvalidArgument("must be healthy, suspect or dead", "health");
}

Status ValidateNode(const api::Node& node) {
  if (node.name.empty()) return InvalidArgument("must not be empty", "node");
  TESSERA_RETURN_IF_ERROR(ValidateNodeHealth(node.health));
  std::set<int64_t> seen;
  for (size_t i = 0; i < node.devices.size(); ++i) {
    if (!seen.insert(node.devices[i].index).second) {
      return InvalidArgument("duplicate device index " + std::to_string(node.devices[i].index),
                             "devices[" + std::to_string(i) + "].index");
    }
  }
  std::set<std::pair<int64_t, int64_t>> pairs;
  for (size_t i = 0; i < node.links.size(); ++i) {
    const api::DeviceLink& l = node.links[i];
    const std::string field = "links[" + std::to_string(i) + "]";
    if (!seen.contains(l.a) || !seen.contains(l.b) || l.a >= l.b) {
      return InvalidArgument("must join two devices of the node, a < b", field);
    }
    if (!pairs.insert({l.a, l.b}).second) return InvalidArgument("duplicate device pair", field);
  }
  return Status::Ok();
}

Status ValidateEntrypoint(const api::Entrypoint& e) {
  if (e.name.starts_with("builtin:") && e.name.size() > 8) {
    if (!e.command.empty()) return InvalidArgument("must be empty for builtin:", "command");
    return Status::Ok();
  }
  if (e.name.starts_with("cmd:") && e.name.size() > 4) {
    if (e.command.empty() || e.command.front() != '/') {
      return InvalidArgument("must be an absolute path for cmd:", "command");
    }
    return Status::Ok();
  }
  return InvalidArgument("must be builtin:<name> or cmd:<name>", "name");
}

std::string_view ChunkStateName(ChunkState state) {
  switch (state) {
    case ChunkState::kPending:
      return "pending";
    case ChunkState::kLeased:
      return "leased";
    case ChunkState::kDone:
      return "done";
  }
  return "unknown";
}

std::optional<ChunkState> ParseChunkState(std::string_view name) {
  for (ChunkState s : {ChunkState::kPending, ChunkState::kLeased, ChunkState::kDone}) {
    if (ChunkStateName(s) == name) return s;
  }
  return std::nullopt;
}

Status ValidateChunkLeaseRequest(const ChunkLeaseRequest& r) {
  if (r.attempt < 1) return InvalidArgument("must be >= 1", "attempt");
  if (r.rank < 0) return InvalidArgument("must be >= 0", "rank");
  if (r.max_chunks < 0) return InvalidArgument("must be >= 0", "max_chunks");
  if (r.lease_until_ms < r.now_ms)
    return InvalidArgument("must not be before now", "lease_until_ms");
  return Status::Ok();
}

bool ChunkLeasable(const InferChunk& c, const ChunkLeaseRequest& r) {
  if (c.state == ChunkState::kPending) return true;
  if (c.state != ChunkState::kLeased) return false;
  return c.lease_until_ms <= r.now_ms || c.attempt < r.attempt;
}

int64_t ClampStoreLimit(int64_t limit) { return std::clamp<int64_t>(limit, 1, 1000); }

}  // namespace tessera::daemon
