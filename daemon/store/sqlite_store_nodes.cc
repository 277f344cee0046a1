// SqliteStore (daemon/store/sqlite_store.h): nodes, their devices and the node rows
// kept in memory.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "daemon/store/sqlite_store.h"
#include "daemon/store/sqlite_store_rows.h"
#include "daemon/store/sqlite_util.h"

namespace tessera::daemon {
namespace {

// Reads the devices of `node` into it.
Status LoadDevices(sqlite3* db, api::Node* node) {
  TESSERA_ASSIGN_OR_RETURN(
      Stmt q, Stmt::Prepare(db, "SELECT detail FROM devices WHERE node = ? ORDER BY idx"));
  q.Bind(1, std::string_view(node->name));
  return q.ForEachRow([&](const Stmt& row) -> Status {
    TESSERA_ASSIGN_OR_RETURN(api::Json j, ParseJsonColumn(row, 0, "device"));
    auto device = api::DeviceFromJson(j);
    if (!device.ok()) return Internal("stored device: " + device.status().ToString());
    device->node = node->name;
    node->devices.push_back(std::move(device).value());
    return Status::Ok();
  });
}

// The columns NodeFromRow reads, in its order.
constexpr char kNodeColumns[] =
    "name, address, health, last_heartbeat_ms, links, cpu_cores, network_bandwidth_bytes_per_s, "
    "network_latency_s, gloo_bandwidth_bytes_per_s, gloo_latency_s, "
    "gloo_cpu_per_hop_s";

// Columns: kNodeColumns.
Result<api::Node> NodeFromRow(const Stmt& q) {
  api::Node n;
  n.name = q.Text(0);
  n.address = q.Text(1);
  n.health = q.Text(2);
  n.last_heartbeat_ms = q.Int(3);
  n.cpu_cores = q.Int(5);
  n.network.bandwidth_bytes_per_s = q.Double(6);
  n.network.latency_s = q.Double(7);
  n.gloo_link.bandwidth_bytes_per_s = q.Double(8);
  n.gloo_link.latency_s = q.Double(9);
  n.gloo_link.cpu_per_hop_s = q.Double(10);
  TESSERA_ASSIGN_OR_RETURN(api::Json links, ParseJsonColumn(q, 4, "node links"));
  if (links.is_array()) {
    for (const api::Json& l : links) {
      auto link = api::DeviceLinkFromJson(l);
      if (!link.ok()) return Internal("stored link: " + link.status().ToString());
      n.links.push_back(*std::move(link));
    }
  }
  return n;
}

}  // namespace

// ---------------------------------------------------------------- nodes

Status SqliteStore::UpsertNode(const api::Node& node) {
  TESSERA_RETURN_IF_ERROR(ValidateNode(node));
  std::vector<std::string> details;
  for (const api::Device& d : node.devices) {
    api::Device copy = d;
    copy.node = node.name;
    details.push_back(*JsonColumn(api::ToJson(copy)));
  }
  api::Json links = api::Json::array();
  for (const api::DeviceLink& l : node.links) links.push_back(api::ToJson(l));
  const std::string links_text = *JsonColumn(links);
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(
        Stmt up,
        Stmt::Prepare(db, UpsertSql("nodes", {"name", "address", "health", "last_heartbeat_ms",
                                              "links", "cpu_cores", "network_bandwidth_bytes_per_s",
                                              "network_latency_s", "gloo_bandwidth_bytes_per_s",
                                              "gloo_latency_s", "gloo_cpu_per_hop_s"})));
    up.Bind(1, std::string_view(node.name))
        .Bind(2, std::string_view(node.address))
        .Bind(3, std::string_view(node.health))
        .Bind(4, node.last_heartbeat_ms)
        .Bind(5, std::string_view(links_text))
        .Bind(6, node.cpu_cores)
        .BindDouble(7, node.network.bandwidth_bytes_per_s)
        .BindDouble(8, node.network.latency_s)
        .BindDouble(9, node.gloo_link.bandwidth_bytes_per_s)
        .BindDouble(10, node.gloo_link.latency_s)
        .BindDouble(11, node.gloo_link.cpu_per_hop_s);
    TESSERA_RETURN_IF_ERROR(up.Run());
    TESSERA_ASSIGN_OR_RETURN(Stmt del, Stmt::Prepare(db, "DELETE FROM devices WHERE node = ?"));
    del.Bind(1, std::string_view(node.name));
    TESSERA_RETURN_IF_ERROR(del.Run());
    for (size_t i = 0; i < node.devices.size(); ++i) {
      const api::Device& d = node.devices[i];
      TESSERA_ASSIGN_OR_RETURN(
          Stmt ins, Stmt::Prepare(db,
                                  "INSERT INTO devices (node, idx, uuid, type, emulated, detail) "
                                  "VALUES (?, ?, ?, ?, ?, ?)"));
      ins.Bind(1, std::string_view(node.name))
          .Bind(2, d.index)
          .Bind(3, std::string_view(d.uuid))
          .Bind(4, std::string_view(d.type))
          .Bind(5, int64_t{d.emulated ? 1 : 0})
          .Bind(6, std::string_view(details[i]));
      TESSERA_RETURN_IF_ERROR(ins.Run());
    }
    // The row as a read will see it, for the in-memory rows.
    TESSERA_ASSIGN_OR_RETURN(Stmt q, Stmt::Prepare(db, std::string("SELECT ") + kNodeColumns +
                                                           " FROM nodes WHERE name = ?"));
    q.Bind(1, std::string_view(node.name));
    TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return Internal("node row missing after its upsert");
    TESSERA_ASSIGN_OR_RETURN(api::Node stored, NodeFromRow(q));
    TESSERA_RETURN_IF_ERROR(LoadDevices(db, &stored));
    AfterCommit([this, stored = std::move(stored)]() mutable {
      const std::string name = stored.name;
      CacheNode(name, std::move(stored));
    });
    return Status::Ok();
  });
}

Result<api::Node> SqliteStore::GetNode(std::string_view name) {
  {
    MutexLock lock(queue_mu_);
    if (closing_) return StoreClosed();
  }
  {
    MutexLock lock(nodes_mu_);
    if (nodes_loaded_) {
      auto it = nodes_.find(std::string(name));
      if (it == nodes_.end()) return NotFound("node " + std::string(name) + " not found");
      return it->second;
    }
  }
  ++node_row_reads_;
  api::Node node;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Stmt q, Stmt::Prepare(db, std::string("SELECT ") + kNodeColumns +
                                                           " FROM nodes WHERE name = ?"));
    q.Bind(1, name);
    TESSERA_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return NotFound("node " + std::string(name) + " not found");
    TESSERA_ASSIGN_OR_RETURN(node, NodeFromRow(q));
    return LoadDevices(db, &node);
  }));
  return node;
}

Result<std::vector<api::Node>> SqliteStore::ListNodes() {
  std::vector<api::Node> out;
  uint64_t version = 0;
  {
    MutexLock lock(queue_mu_);
    if (closing_) return StoreClosed();
  }
  {
    MutexLock lock(nodes_mu_);
    if (nodes_loaded_) {
      out.reserve(nodes_.size());
      for (const auto& [name, node] : nodes_) out.push_back(node);
      return out;
    }
    version = nodes_version_;
  }
  ++node_row_reads_;
  TESSERA_RETURN_IF_ERROR(Read([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Stmt q, Stmt::Prepare(db, std::string("SELECT ") + kNodeColumns +
                                                           " FROM nodes ORDER BY name"));
    TESSERA_RETURN_IF_ERROR(q.AppendRows(NodeFromRow, &out));
    for (api::Node& n : out) TESSERA_RETURN_IF_ERROR(LoadDevices(db, &n));
    return Status::Ok();
  }));
  MutexLock lock(nodes_mu_);
  // Kept only if no node write committed since the read began (it might
  // not show it); otherwise the next listing tries again.
  if (!nodes_loaded_ && nodes_version_ == version) {
    for (const api::Node& n : out) nodes_[n.name] = n;
    nodes_loaded_ = true;
  }
  return out;
}

Status SqliteStore::SetNodeHealth(std::string_view name, std::string_view health) {
  TESSERA_RETURN_IF_ERROR(ValidateNodeHealth(health));
  return Write([&](sqlite3* db) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Stmt up,
                             Stmt::Prepare(db, "UPDATE nodes SET health = ? WHERE name = ?"));
    up.Bind(1, health).Bind(2, name);
    TESSERA_RETURN_IF_ERROR(RunOnExistingRow(db, up, "node " + std::string(name) + " not found"));
    AfterCommit([this, node = std::string(name), health = std::string(health)] {
      MutexLock lock(nodes_mu_);
      ++nodes_version_;
      auto it = nodes_.find(node);
      if (it != nodes_.end()) it->second.health = health;
    });
    return Status::Ok();
  });
}

void SqliteStore::CacheNode(const std::string& name, std::optional<api::Node> row) {
  MutexLock lock(nodes_mu_);
  ++nodes_version_;
  if (!nodes_loaded_) return;
  if (row) {
    nodes_[name] = *std::move(row);
  } else {
    nodes_.erase(name);
  }
}

}  // namespace tessera::daemon
