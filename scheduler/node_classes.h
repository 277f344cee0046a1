// NodeClasses: which nodes (and which devices within a node) of a cluster a
// planner cannot tell apart, so that a job's plan on some devices serves for
// every device set of the same shape. A share-policy round asks a job's
// throughput on thousands of device sets (scheduler/share_policy.h); on a
// cluster of a few node types most of them are the same question.
//
// Two devices of a node are alike when every field but index and busy
// matches. Two nodes are alike when their intra-node and network links match
// and their devices match class for class; a node named by a node link, or
// whose device a device link names, is alike to no other node (the link sets
// it apart), and its devices to no other device.
//
// Canonicalize maps a device set to its shape: per node it holds devices of,
// the node's class and how many devices of each device class it takes, the
// list sorted. Equal shapes, equal best plans (up to renaming): the shape's
// representative set places the same counts on the first nodes of each class
// (in snapshot order) and their first devices of each class (by index), and
// `ToQuery` renames a plan's devices on the representative back to the set
// asked about.
//
// Ownership: copies what it needs of the snapshot. Thread safety: immutable
// after construction; const methods may run concurrently.
#ifndef TESSERA_SCHEDULER_NODE_CLASSES_H_
#define TESSERA_SCHEDULER_NODE_CLASSES_H_

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "scheduler/cluster_snapshot.h"
#include "scheduler/queue_pass.h"

namespace tessera::scheduler {

class NodeClasses {
 public:
  explicit NodeClasses(const ClusterSnapshot& cluster);

  struct Shape {
    // Equal keys: equal shapes. Includes no node name.
    std::string key;
    // The representative set of this shape ("node:index" each).
    DeviceSet representative;
    // Representative device -> the device of the set asked about.
    std::map<std::string, std::string> to_query;

    // The devices of the set asked about that `planned` (devices of the
    // representative set) stand for; devices outside the representative set
    // are left out.
    DeviceSet ToQuery(const std::vector<DeviceId>& planned) const;
  };

  // The shape of `devices`. kInvalidArgument when one is not "node:index" of
  // a device of the snapshot.
  Result<Shape> Canonicalize(const DeviceSet& devices) const;

  // How many node classes the snapshot has (for tests and benches).
  int node_class_count() const { return node_class_count_; }

 private:
  struct NodeInfo {
    int node_class = 0;
    std::map<int, int> device_class;  // device index -> class
  };
  std::map<std::string, NodeInfo> nodes_;
  // Node class -> its nodes in snapshot order.
  std::map<int, std::vector<std::string>> nodes_of_class_;
  // Node -> device class -> its device indices in ascending order.
  std::map<std::string, std::map<int, std::vector<int>>> devices_of_class_;
  int node_class_count_ = 0;
};

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_NODE_CLASSES_H_
