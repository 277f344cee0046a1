#include "scheduler/node_classes.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <set>
#include <tuple>

namespace tessera::scheduler {

namespace {

// Exact: two numbers are one text only when they are the same double.
std::string Number(double x) { return std::to_string(std::bit_cast<uint64_t>(x)); }

std::string LinkText(const Link& l) {
  return Number(l.bandwidth_bytes_per_s) + "/" + Number(l.latency_s);
}

// Every field a planner reads of a device but its index and busy flag.
std::string DeviceText(const Device& d) {
  return d.type + "|" + std::to_string(d.memory_bytes) + "|" + Number(d.tflops) + "|" +
         Number(d.tflops_half) + "|" + Number(d.memory_bandwidth_bytes_per_s) + "|" +
         d.measured_as + "|" + Number(d.relative_speed) + "|" + Number(d.compute_scale) + "|" +
         d.backend + "|" + d.unmeasured_reason;
}

}  // namespace

NodeClasses::NodeClasses(const ClusterSnapshot& cluster) {
  std::set<std::string> linked;  // nodes a node or device link sets apart
  for (const NodeLink& l : cluster.node_links) linked.insert({l.a, l.b});
  for (const DeviceLink& l : cluster.device_links) linked.insert({l.a.node, l.b.node});
  std::map<std::string, int> device_classes, node_classes;
  auto class_of = [](std::map<std::string, int>* classes, const std::string& text) {
    return classes->try_emplace(text, static_cast<int>(classes->size())).first->second;
  };
  for (const Node& n : cluster.nodes) {
    // A linked node's devices and the node itself carry its name: alike to none.
    const std::string apart = linked.contains(n.name) ? n.name + "|" : "";
    NodeInfo info;
    std::multiset<int> classes;
    for (const Device& d : n.devices) {
      const int c = class_of(&device_classes, apart + DeviceText(d));
      info.device_class[d.index] = c;
      classes.insert(c);
      devices_of_class_[n.name][c].push_back(d.index);
    }
    for (auto& [c, indices] : devices_of_class_[n.name]) std::sort(indices.begin(), indices.end());
    // Nodes of one machine share its cores (cost_model.h CollectiveCpuHopSeconds):
    // alike only to nodes of the same machine.
    std::string text = apart + LinkText(n.intra_node) + "|" + LinkText(n.network) + "|" +
                       (n.host.empty() ? "" : "host:" + n.host) + "/" +
                       std::to_string(n.host_cores) + "/" + Number(n.collective_cpu_per_hop_s);
    for (int c : classes) text += "|" + std::to_string(c);
    info.node_class = class_of(&node_classes, text);
    nodes_of_class_[info.node_class].push_back(n.name);
    nodes_.emplace(n.name, std::move(info));
  }
  node_class_count_ = static_cast<int>(node_classes.size());
}

Result<NodeClasses::Shape> NodeClasses::Canonicalize(const DeviceSet& devices) const {
  // Per node of the set: device class -> the set's indices there, ascending.
  std::map<std::string, std::map<int, std::vector<int>>> taken;
  for (const std::string& d : devices) {
    const size_t colon = d.rfind(':');
    auto node = colon == std::string::npos ? nodes_.end() : nodes_.find(d.substr(0, colon));
    int index = -1;
    if (node != nodes_.end()) {
      try {
        size_t used = 0;
        index = std::stoi(d.substr(colon + 1), &used);
        if (used != d.size() - colon - 1) index = -1;
      } catch (const std::exception&) {
        index = -1;
      }
    }
    auto device = node == nodes_.end() ? std::map<int, int>::const_iterator{}
                                       : node->second.device_class.find(index);
    if (node == nodes_.end() || device == node->second.device_class.end()) {
      return InvalidArgument("no device " + d + " in the cluster", "devices");
    }
    taken[node->first][device->second].push_back(index);
  }
  // The set's nodes by class and counts, so alike nodes line up.
  struct Entry {
    int node_class;
    std::string counts;  // "device class x count, ..."
    std::string node;
  };
  std::vector<Entry> entries;
  for (auto& [node, by_class] : taken) {
    std::string counts;
    for (auto& [c, indices] : by_class) {
      std::sort(indices.begin(), indices.end());
      counts += std::to_string(c) + "x" + std::to_string(indices.size()) + ",";
    }
    entries.push_back({nodes_.at(node).node_class, counts, node});
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.node_class, a.counts, a.node) < std::tie(b.node_class, b.counts, b.node);
  });
  Shape shape;
  std::map<int, size_t> next;  // node class -> its next representative node
  for (const Entry& e : entries) {
    shape.key += std::to_string(e.node_class) + ":" + e.counts + ";";
    const std::string& rep = nodes_of_class_.at(e.node_class).at(next[e.node_class]++);
    for (const auto& [c, indices] : taken.at(e.node)) {
      const std::vector<int>& rep_indices = devices_of_class_.at(rep).at(c);
      for (size_t i = 0; i < indices.size(); ++i) {
        const std::string from = DeviceId{rep, rep_indices.at(i)}.ToString();
        shape.representative.insert(from);
        shape.to_query[from] = DeviceId{e.node, indices[i]}.ToString();
      }
    }
  }
  return shape;
}

DeviceSet NodeClasses::Shape::ToQuery(const std::vector<DeviceId>& planned) const {
  DeviceSet out;
  for (const DeviceId& d : planned) {
    auto it = to_query.find(d.ToString());
    if (it != to_query.end()) out.insert(it->second);
  }
  return out;
}

}  // namespace tessera::scheduler
