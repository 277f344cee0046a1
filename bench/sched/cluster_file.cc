// A lab's cluster file (cluster_file.h).
//
// Steps (ParseClusterFile):
//   1. The root: a mapping with `nodes` (and optional `name` and `users`, the
//      latter read as tesserad's config reads it: user_policies_yaml.h).
//   2. Each node entry: its name, how many alike machines it stands for, its
//      links (network, intra_node) and its GPUs (type, count, memory, tflops,
//      tflops_half, memory_bandwidth).
//   3. The machines, in file order: one per count (named name-0, name-1, ...
//      when count > 1), each with its GPUs indexed 0.. in file order; names
//      must not repeat.
#include "bench/sched/cluster_file.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "common/file_system.h"
#include "common/quantities.h"
#include "common/yaml_scalars.h"
#include "scheduler/user_policies_yaml.h"

namespace tessera::scheduler::sim {
namespace {

constexpr int64_t kMaxCount = 1024;  // machines per entry, GPUs per entry

// A whole number in [1, kMaxCount].
Result<int64_t> ReadCount(const YAML::Node& value, const std::string& field) {
  std::optional<int64_t> n = value.IsScalar() ? ParseWholeNumber(value.Scalar()) : std::nullopt;
  if (!n || *n < 1 || *n > kMaxCount) {
    return InvalidArgument("must be a whole number from 1 to " + std::to_string(kMaxCount) +
                               ", got '" + (value.IsScalar() ? value.Scalar() : "a non-scalar") +
                               "'",
                           field);
  }
  return *n;
}

// A positive finite number.
Result<double> ReadPositive(const YAML::Node& value, const std::string& field) {
  TESSERA_ASSIGN_OR_RETURN(double v, YamlNumber(value, field));
  if (!(v > 0)) return InvalidArgument("must be positive, got '" + value.Scalar() + "'", field);
  return v;
}

// A quantity `parse` reads (a rate like 10Gbit, a duration like 50us, a byte
// size like 80GiB); `expected` says what, with the value quoted.
template <typename T>
Result<T> ReadQuantity(const YAML::Node& value, std::optional<T> (*parse)(std::string_view),
                       const std::string& expected, const std::string& field) {
  std::optional<T> q = value.IsScalar() ? parse(value.Scalar()) : std::nullopt;
  if (!q || !(*q > 0)) {
    return InvalidArgument("must be " + expected + ", got '" +
                               (value.IsScalar() ? value.Scalar() : "a non-scalar") + "'",
                           field);
  }
  return *q;
}

// A link: bandwidth and latency, each optional (the default's where absent).
Result<Link> ReadLink(const YAML::Node& node, Link link, const std::string& prefix) {
  if (!node.IsMap()) return InvalidArgument("must be a mapping with bandwidth, latency", prefix);
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>("");
    const std::string field = prefix + "." + key;
    if (key == "bandwidth") {
      TESSERA_ASSIGN_OR_RETURN(
          link.bandwidth_bytes_per_s,
          ReadQuantity<double>(kv.second, ParseBandwidth,
                               "a rate like 10Gbit (bits/s) or 16GB (bytes/s)", field));
    } else if (key == "latency") {
      TESSERA_ASSIGN_OR_RETURN(
          link.latency_s,
          ReadQuantity<double>(kv.second, ParseDuration, "a positive time like 50us", field));
    } else {
      return InvalidArgument("unknown field (expected bandwidth, latency)", field);
    }
  }
  return link;
}

struct GpuEntry {
  Device device;
  int64_t count = 1;
};

Result<GpuEntry> ReadGpu(const YAML::Node& node, const std::string& prefix) {
  if (!node.IsMap()) return InvalidArgument("must be a mapping", prefix);
  GpuEntry g;
  bool have_type = false, have_memory = false, have_tflops = false;
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>("");
    const std::string field = prefix + "." + key;
    const YAML::Node& value = kv.second;
    if (key == "type") {
      TESSERA_ASSIGN_OR_RETURN(g.device.type, YamlString(value, field));
      if (g.device.type.empty()) return InvalidArgument("must not be empty", field);
      have_type = true;
    } else if (key == "count") {
      TESSERA_ASSIGN_OR_RETURN(g.count, ReadCount(value, field));
    } else if (key == "memory") {
      TESSERA_ASSIGN_OR_RETURN(
          g.device.memory_bytes,
          ReadQuantity<int64_t>(value, ParseByteSize, "a byte size like 24GiB", field));
      have_memory = true;
    } else if (key == "tflops") {
      TESSERA_ASSIGN_OR_RETURN(g.device.tflops, ReadPositive(value, field));
      have_tflops = true;
    } else if (key == "tflops_half") {
      TESSERA_ASSIGN_OR_RETURN(g.device.tflops_half, ReadPositive(value, field));
    } else if (key == "memory_bandwidth") {
      TESSERA_ASSIGN_OR_RETURN(
          g.device.memory_bandwidth_bytes_per_s,
          ReadQuantity<double>(value, ParseBandwidth, "a rate like 936GB (bytes/s)", field));
    } else {
      return InvalidArgument(
          "unknown field (expected type, count, memory, tflops, tflops_half, memory_bandwidth)",
          field);
    }
  }
  if (!have_type) return InvalidArgument("is required", prefix + ".type");
  if (!have_memory) return InvalidArgument("is required", prefix + ".memory");
  if (!have_tflops) return InvalidArgument("is required", prefix + ".tflops");
  return g;
}

// (2) One node entry; (3) its machines appended to `nodes`.
Status ReadNode(const YAML::Node& node, const std::string& prefix, std::vector<Node>* nodes) {
  if (!node.IsMap()) return InvalidArgument("must be a mapping with name and gpus", prefix);
  Node proto;
  int64_t count = 1;
  std::vector<GpuEntry> gpus;
  bool have_gpus = false;
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>("");
    const std::string field = prefix + "." + key;
    const YAML::Node& value = kv.second;
    if (key == "name") {
      TESSERA_ASSIGN_OR_RETURN(proto.name, YamlString(value, field));
      if (proto.name.empty() || proto.name.find_first_of(":, \t") != std::string::npos) {
        return InvalidArgument(
            "must be a non-empty name without ':', ',' or spaces, got '" + proto.name + "'", field);
      }
    } else if (key == "count") {
      TESSERA_ASSIGN_OR_RETURN(count, ReadCount(value, field));
    } else if (key == "network") {
      TESSERA_ASSIGN_OR_RETURN(proto.network, ReadLink(value, proto.network, field));
    } else if (key == "intra_node") {
      TESSERA_ASSIGN_OR_RETURN(proto.intra_node, ReadLink(value, proto.intra_node, field));
    } else if (key == "gpus") {
      if (!value.IsSequence() || value.size() == 0) {
        return InvalidArgument("must be a list of at least one GPU entry", field);
      }
      for (size_t i = 0; i < value.size(); ++i) {
        TESSERA_ASSIGN_OR_RETURN(GpuEntry g,
                                 ReadGpu(value[i], field + "[" + std::to_string(i) + "]"));
        gpus.push_back(std::move(g));
      }
      have_gpus = true;
    } else {
      return InvalidArgument("unknown field (expected name, count, network, intra_node, gpus)",
                             field);
    }
  }
  if (proto.name.empty()) return InvalidArgument("is required", prefix + ".name");
  if (!have_gpus) return InvalidArgument("is required", prefix + ".gpus");
  int64_t per_node = 0;
  for (const GpuEntry& g : gpus) per_node += g.count;
  if (per_node > kMaxCount) {
    return InvalidArgument(
        "at most " + std::to_string(kMaxCount) + " GPUs a machine, got " + std::to_string(per_node),
        prefix + ".gpus");
  }
  for (int64_t m = 0; m < count; ++m) {
    Node n = proto;
    if (count > 1) n.name += "-" + std::to_string(m);
    int index = 0;
    for (const GpuEntry& g : gpus) {
      for (int64_t k = 0; k < g.count; ++k) {
        Device d = g.device;
        d.index = index++;
        n.devices.push_back(std::move(d));
      }
    }
    nodes->push_back(std::move(n));
  }
  return Status::Ok();
}

}  // namespace

Result<Cluster> ParseClusterFile(std::string_view text, const std::string& name) {
  TESSERA_ASSIGN_OR_RETURN(YAML::Node root, YamlParse(text));
  // (1)
  if (!root.IsMap()) return InvalidArgument("the cluster file must be a mapping with 'nodes'");
  Cluster cluster;
  cluster.name = name;
  bool have_nodes = false;
  try {
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>("");
      if (key == "name") {
        TESSERA_ASSIGN_OR_RETURN(cluster.name, YamlString(kv.second, "name"));
        if (cluster.name.empty()) return InvalidArgument("must not be empty", "name");
      } else if (key == "nodes") {
        if (!kv.second.IsSequence() || kv.second.size() == 0) {
          return InvalidArgument("must be a list of at least one node entry", "nodes");
        }
        for (size_t i = 0; i < kv.second.size(); ++i) {
          TESSERA_RETURN_IF_ERROR(
              ReadNode(kv.second[i], "nodes[" + std::to_string(i) + "]", &cluster.snapshot.nodes));
        }
        have_nodes = true;
      } else if (key == "users") {
        TESSERA_RETURN_IF_ERROR(ReadUserPolicies(kv.second, &cluster.users));
      } else {
        return InvalidArgument("unknown field (expected name, nodes, users)", key);
      }
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("not a cluster file: ") + e.what());
  }
  if (!have_nodes) return InvalidArgument("is required", "nodes");
  // (3) Names do not repeat.
  std::set<std::string> names;
  std::map<std::string, int64_t> by_type;
  for (const Node& n : cluster.snapshot.nodes) {
    if (!names.insert(n.name).second) {
      return InvalidArgument("machine '" + n.name + "' is named twice", "nodes");
    }
    for (const Device& d : n.devices) ++by_type[d.type];
  }
  cluster.about = std::to_string(cluster.snapshot.nodes.size()) + " machine" +
                  (cluster.snapshot.nodes.size() == 1 ? "" : "s") + ":";
  for (const auto& [type, n] : by_type) {
    cluster.about += (cluster.about.back() == ':' ? " " : ", ") + std::to_string(n) + " " + type;
  }
  return cluster;
}

Result<Cluster> ReadClusterFile(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, FileSystem::Default()->ReadFile(path));
  Result<Cluster> c = ParseClusterFile(text, std::filesystem::path(path).stem().string());
  if (!c.ok()) return c.status().WithPrefix(path);
  return c;
}

Result<UserPolicies> ReadUsersBlock(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, FileSystem::Default()->ReadFile(path));
  UserPolicies users;
  Status st = [&]() -> Status {
    TESSERA_ASSIGN_OR_RETURN(YAML::Node root, YamlParse(text));
    if (!root.IsMap() || !root["users"]) {
      return InvalidArgument("has no users: block (weights and limits by user)", "users");
    }
    try {
      return ReadUserPolicies(root["users"], &users);
    } catch (const YAML::Exception& e) {
      return InvalidArgument(std::string("not a users: block: ") + e.what(), "users");
    }
  }();
  if (!st.ok()) return st.WithPrefix(path);
  return users;
}

}  // namespace tessera::scheduler::sim
