// A lab's own cluster for the scheduler simulator (trace_sim --cluster): its
// machines and their GPUs, read from a YAML file, so a lab can replay its
// traces on the boxes it owns rather than on the built-in demo lab and mixed
// 24-GPU cluster (clusters.h).
//
// The file (bench/sched/README.md, "Cluster files"):
//
//   name: archive-lab              # optional; default: the file's name
//   nodes:                         # the machines, one entry per kind
//     - name: boxa
//       count: 2                   # optional: that many alike machines,
//                                  #   boxa-0, boxa-1 (default 1: boxa)
//       network:                   # optional: its link to the others
//         bandwidth: 10Gbit        #   (default 10 GbE, 50us)
//         latency: 50us
//       intra_node:                # optional: between its GPUs
//         bandwidth: 16GB          #   (default PCIe: 16 GB/s, 10us)
//         latency: 10us
//       gpus:
//         - type: A100-80GB        # the GPU model
//           count: 4               # optional (default 1)
//           memory: 80GiB
//           tflops: 19.5           # dense fp32 TFLOPS, as agents measure
//           tflops_half: 78        # optional (default 2 x tflops)
//           memory_bandwidth: 2TB  # optional, bytes/s (default: not modelled)
//   users:                         # optional: weights and limits, as in
//     alice: {weight: 2}           #   tesserad's config (default: weight 1,
//     "*": {max_devices: 4}        #   no limits, for every user)
//
// Every error is kInvalidArgument naming the field ("nodes[1].gpus[0].memory")
// and, where a value is wrong, quoting it.
// Thread safety: pure functions.
#ifndef TESSERA_BENCH_SCHED_CLUSTER_FILE_H_
#define TESSERA_BENCH_SCHED_CLUSTER_FILE_H_

#include <string>
#include <string_view>

#include "bench/sched/clusters.h"
#include "common/status.h"

namespace tessera::scheduler::sim {

// The cluster the text describes; `name` when the text names none.
Result<Cluster> ParseClusterFile(std::string_view text, const std::string& name);

// The cluster in the file at `path` (its name without folder and extension,
// when the file names none); NotFound/kInvalidArgument with the path.
Result<Cluster> ReadClusterFile(const std::string& path);

// The `users:` block of the YAML file at `path` (tesserad's config, or a
// cluster file); its other keys are not read. kInvalidArgument when it has
// none or the block is wrong (naming the field), with the path.
Result<UserPolicies> ReadUsersBlock(const std::string& path);

}  // namespace tessera::scheduler::sim

#endif  // TESSERA_BENCH_SCHED_CLUSTER_FILE_H_
