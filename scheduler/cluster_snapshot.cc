#include "scheduler/cluster_snapshot.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace tessera::scheduler {

std::string DeviceId::ToString() const { return node + ":" + std::to_string(index); }

namespace {

const Node* FindNode(const ClusterSnapshot& s, const std::string& name) {
  for (const Node& n : s.nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

bool HasDevice(const ClusterSnapshot& s, const DeviceId& id) {
  const Node* n = FindNode(s, id.node);
  if (n == nullptr) return false;
  return std::any_of(n->devices.begin(), n->devices.end(),
                     [&](const Device& d) { return d.index == id.index; });
}

bool ValidLink(const Link& l) { return l.bandwidth_bytes_per_s > 0 && l.latency_s >= 0; }

}  // namespace

int ClusterSnapshot::DeviceCount() const {
  int n = 0;
  for (const Node& node : nodes) n += static_cast<int>(node.devices.size());
  return n;
}

Status ClusterSnapshot::Validate() const {
  std::set<std::string> names;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    const std::string field = "nodes[" + std::to_string(i) + "]";
    if (n.name.empty()) return InvalidArgument("node name is empty", field + ".name");
    if (!names.insert(n.name).second) {
      return InvalidArgument("duplicate node name '" + n.name + "'", field + ".name");
    }
    if (!ValidLink(n.intra_node) || !ValidLink(n.network)) {
      return InvalidArgument("link bandwidth must be positive and latency non-negative", field);
    }
    if (n.host_cores < 0) return InvalidArgument("must be >= 0", field + ".host_cores");
    if (!(n.collective_cpu_per_hop_s >= 0) || !std::isfinite(n.collective_cpu_per_hop_s)) {
      return InvalidArgument("must be a number >= 0", field + ".collective_cpu_per_hop_s");
    }
    std::set<int> indices;
    for (size_t j = 0; j < n.devices.size(); ++j) {
      const Device& d = n.devices[j];
      const std::string dfield = field + ".devices[" + std::to_string(j) + "]";
      if (d.index < 0 || !indices.insert(d.index).second) {
        return InvalidArgument("device index must be unique and non-negative", dfield + ".index");
      }
      if (d.memory_bytes < 0) {
        return InvalidArgument("memory must be non-negative", dfield + ".memory_bytes");
      }
      if (d.tflops < 0 || d.tflops_half < 0 || d.memory_bandwidth_bytes_per_s < 0) {
        return InvalidArgument("throughput must be non-negative", dfield + ".tflops");
      }
      if (!(d.relative_speed > 0)) {
        return InvalidArgument("must be positive", dfield + ".relative_speed");
      }
      if (!(d.compute_scale > 0)) {
        return InvalidArgument("must be positive", dfield + ".compute_scale");
      }
    }
  }
  for (size_t i = 0; i < device_links.size(); ++i) {
    const DeviceLink& l = device_links[i];
    const std::string field = "device_links[" + std::to_string(i) + "]";
    if (!HasDevice(*this, l.a) || !HasDevice(*this, l.b) || l.a == l.b) {
      return InvalidArgument("device link names unknown or identical devices", field);
    }
    if (l.a.node != l.b.node) {
      return InvalidArgument("device link must join two devices of one node", field);
    }
    if (!ValidLink(l.link)) return InvalidArgument("bad link figures", field + ".link");
  }
  for (size_t i = 0; i < node_links.size(); ++i) {
    const NodeLink& l = node_links[i];
    const std::string field = "node_links[" + std::to_string(i) + "]";
    if (FindNode(*this, l.a) == nullptr || FindNode(*this, l.b) == nullptr || l.a == l.b) {
      return InvalidArgument("node link names unknown or identical nodes", field);
    }
    if (!ValidLink(l.link)) return InvalidArgument("bad link figures", field + ".link");
  }
  return Status::Ok();
}

Link ClusterSnapshot::LinkBetween(const DeviceId& a, const DeviceId& b) const {
  if (a.node == b.node) {
    for (const DeviceLink& l : device_links) {
      if ((l.a == a && l.b == b) || (l.a == b && l.b == a)) return l.link;
    }
    const Node* n = FindNode(*this, a.node);
    return n != nullptr ? n->intra_node : Link{};
  }
  for (const NodeLink& l : node_links) {
    if ((l.a == a.node && l.b == b.node) || (l.a == b.node && l.b == a.node)) return l.link;
  }
  const Node* na = FindNode(*this, a.node);
  const Node* nb = FindNode(*this, b.node);
  if (na == nullptr || nb == nullptr) return Link{};
  return Link{std::min(na->network.bandwidth_bytes_per_s, nb->network.bandwidth_bytes_per_s),
              std::max(na->network.latency_s, nb->network.latency_s)};
}

}  // namespace tessera::scheduler
