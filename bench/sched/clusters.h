// Clusters the scheduler simulator replays traces on: the demo lab's five
// emulated devices as GPUs, and mixed clusters of three GPU types (a lab's
// own: cluster_file.h).
// Thread safety: pure functions returning values.
#ifndef TESSERA_BENCH_SCHED_CLUSTERS_H_
#define TESSERA_BENCH_SCHED_CLUSTERS_H_

#include <string>

#include "scheduler/cluster_snapshot.h"
#include "scheduler/queue_order.h"

namespace tessera::scheduler::sim {

struct Cluster {
  std::string name;
  std::string about;
  ClusterSnapshot snapshot;
  // Its users' weights and limits (a cluster file's `users:`, as tesserad's
  // config); empty: every user weight 1, no limits.
  UserPolicies users;
};

// examples/demo-lab: boxa 2 x A100-80GB, boxb 1 x RTX4090-24GB, boxc 2 x
// GTX1080-8GB at their declared relative speeds (clusters.cc).
Cluster DemoLab();
// 24 GPUs: two 4-GPU boxes each of A100-, V100- and T4-like GPUs.
Cluster Mixed24();
// 64 GPUs for the round-time check: 16 boxes of 4.
Cluster Mixed64();

}  // namespace tessera::scheduler::sim

#endif  // TESSERA_BENCH_SCHED_CLUSTERS_H_
