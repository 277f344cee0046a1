// Users' weights and limits as a YAML config writes them: the `users:` block
// of tesserad's config (daemon/daemon_config.h) and of a simulator's cluster
// file (bench/sched/cluster_file.h), read by one function with one wording of
// its errors.
//
//   users:
//     alice: {weight: 2, max_devices: 6}
//     "*":   {max_pending_jobs: 200, max_running_jobs: 4}   # everyone else
//
// Its own library (tessera_user_policies_yaml): the scheduler itself reads no
// files and links no YAML.
// Thread safety: a pure function.
#ifndef TESSERA_SCHEDULER_USER_POLICIES_YAML_H_
#define TESSERA_SCHEDULER_USER_POLICIES_YAML_H_

#include <yaml-cpp/yaml.h>

#include "common/status.h"
#include "scheduler/queue_order.h"

namespace tessera::scheduler {

// Replaces *out with the policies the mapping `node` (user name -> {weight,
// max_running_jobs, max_devices, max_pending_jobs}) holds. Errors are
// kInvalidArgument naming the field ("users.alice.weight").
Status ReadUserPolicies(const YAML::Node& node, UserPolicies* out);

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_USER_POLICIES_YAML_H_
