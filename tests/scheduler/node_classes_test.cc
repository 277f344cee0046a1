#include "scheduler/node_classes.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "scheduler/planner.h"
#include "tests/scheduler/builders.h"

namespace tessera::scheduler::testing {
namespace {

// a and b alike (two A each); c two B; d like a but for its NVLink; e and f
// alike, each one A and one B.
ClusterSnapshot Lab() {
  return ClusterBuilder()
      .Node("a")
      .Gpus(2, "A", 80, 20)
      .Node("b")
      .Gpus(2, "A", 80, 20)
      .Node("c")
      .Gpus(2, "B", 16, 5)
      .Node("d")
      .Gpus(2, "A", 80, 20)
      .NvLink(0, 1)
      .Node("e")
      .Gpu("A", 80, 20)
      .Gpu("B", 16, 5)
      .Node("f")
      .Gpu("A", 80, 20)
      .Gpu("B", 16, 5)
      .Build();
}

TEST(NodeClassesTest, SetsOfTheSameShapeShareAKey) {
  const NodeClasses classes(Lab());
  EXPECT_EQ(classes.node_class_count(), 4);  // {a, b}, {c}, {d}, {e, f}
  struct Row {
    const char* what;
    DeviceSet x, y;
    bool same;
  };
  const Row rows[] = {
      {"one device of alike nodes", {"a:0"}, {"b:1"}, true},
      {"two on one node, one each on two", {"a:0", "a:1"}, {"a:0", "b:0"}, false},
      {"one each on two alike nodes", {"a:0", "b:0"}, {"a:1", "b:1"}, true},
      {"a linked node is alike to none", {"d:0"}, {"a:0"}, false},
      {"alike nodes with another", {"a:0", "c:0"}, {"b:1", "c:1"}, true},
      {"a node's devices of other types", {"e:0"}, {"e:1"}, false},
      {"alike mixed nodes", {"e:1"}, {"f:1"}, true},
      {"different types", {"a:0"}, {"c:0"}, false},
      {"the empty set", {}, {}, true},
  };
  for (const Row& r : rows) {
    auto x = classes.Canonicalize(r.x);
    auto y = classes.Canonicalize(r.y);
    ASSERT_TRUE(x.ok() && y.ok()) << r.what;
    EXPECT_EQ(x->key == y->key, r.same) << r.what << ": " << x->key << " vs " << y->key;
    EXPECT_EQ(x->representative.size(), r.x.size()) << r.what;
  }
}

TEST(NodeClassesTest, TheRepresentativeTakesTheFirstAlikeNodesAndMapsBack) {
  const NodeClasses classes(Lab());
  auto shape = classes.Canonicalize({"b:1", "c:1", "f:1"});
  ASSERT_TRUE(shape.ok()) << shape.status().ToString();
  EXPECT_EQ(shape->representative, (DeviceSet{"a:0", "c:0", "e:1"}));
  EXPECT_EQ(shape->ToQuery({{"a", 0}, {"e", 1}, {"b", 0}}), (DeviceSet{"b:1", "f:1"}));
  // Two alike nodes in the set take the class's first two nodes.
  shape = classes.Canonicalize({"b:0", "b:1", "a:1"});
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(shape->representative, (DeviceSet{"a:0", "b:0", "b:1"}));
  EXPECT_EQ(shape->ToQuery({{"a", 0}, {"b", 0}, {"b", 1}}), (DeviceSet{"a:1", "b:0", "b:1"}));
  EXPECT_EQ(shape->ToQuery({{"a", 1}}), DeviceSet{}) << "not in the representative set";
}

// What the shape is for: the planner's best plan on a set and on its
// representative predict the same step.
TEST(NodeClassesTest, APlanOnTheRepresentativePredictsTheSetsStep) {
  const ClusterSnapshot lab = Lab();
  const NodeClasses classes(lab);
  auto step_on = [&](const DeviceSet& on) {
    ClusterSnapshot snap = lab;
    for (Node& n : snap.nodes) {
      for (Device& d : n.devices) d.busy = !on.contains(DeviceId{n.name, d.index}.ToString());
    }
    Result<PlanSet> plans = MakePlans(snap, MediumModel(), Train(32));
    EXPECT_TRUE(plans.ok() && !plans->plans.empty());
    return plans.ok() && !plans->plans.empty() ? plans->plans.front().predicted.step_s : -1.0;
  };
  const std::vector<DeviceSet> sets = {
      {"b:1"}, {"b:0", "b:1", "c:1"}, {"b:1", "f:0", "f:1"}, {"a:1", "b:1", "c:0", "c:1"}};
  for (const DeviceSet& on : sets) {
    auto shape = classes.Canonicalize(on);
    ASSERT_TRUE(shape.ok());
    EXPECT_DOUBLE_EQ(step_on(on), step_on(shape->representative)) << shape->key;
  }
}

TEST(NodeClassesTest, ADeviceNotInTheClusterIsRefused) {
  const NodeClasses classes(Lab());
  for (const char* bad : {"zz:0", "a:9", "a:x", "a", "a:1x", ":0"}) {
    auto shape = classes.Canonicalize({bad});
    EXPECT_EQ(shape.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(shape.status().message().find(bad), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace tessera::scheduler::testing
