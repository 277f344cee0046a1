// Planning glue: turns what the controller knows (a job spec, the nodes the
// agents reported, the devices other jobs hold) into the scheduler's plain
// inputs, and asks the planner for ranked plans.
//
// The scheduler itself (scheduler/planner.h) is pure; this file only
// translates. Builtin entrypoints are planned with the measured profile of
// that model, and so is a train job of an exported model ("model:<name>",
// a TorchScript sequence of layers) with the profile of its file: both may
// get any layout. A registered command ("cmd:<name>"), an exported model's
// infer job, and a model file whose profile failed are opaque to the
// controller: planned as data parallel with a small generic profile that
// spreads the batch by device speed.
//
// Thread safety: pure functions.
#ifndef TESSERA_DAEMON_CONTROLLER_PLANNING_H_
#define TESSERA_DAEMON_CONTROLLER_PLANNING_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/types.h"
#include "common/status.h"
#include "daemon/controller/profile_target.h"
#include "scheduler/cluster_snapshot.h"
#include "scheduler/job_request.h"
#include "scheduler/model_profile.h"
#include "scheduler/plan.h"
#include "scheduler/planner.h"

namespace tessera::daemon {

// Hosts whose emulated devices declare more speed than the host has cores. Nodes
// reporting one address run on one machine (several agents in a demo); an emulated
// device of relative speed s keeps s of one core busy while it computes
// (worker/runtime/emulated_device.h), so above the host's cores the devices wait for
// cores and run slower than declared. One line per such host, naming its nodes, the
// sum and the cores; empty when every host fits or reports no cores. Each agent
// checks its own inventory at start (agent/inventory_file.h); this sees them all.
std::vector<std::string> EmulationCapacityWarnings(const std::vector<api::Node>& nodes);

// The cluster as the planner sees it, minus what each heartbeat samples (its
// time, a device's utilization and memory in use, none of which SnapshotOf
// reads), as a hash: a change here (a node's devices, links or health)
// re-plans every job.
uint64_t InventoryKey(const std::vector<api::Node>& nodes);

// A node whose devices all talk Gloo (emulated GPUs, CPUs) and whose agent
// measured its machine's loopback Gloo link (api::Node::gloo_link): its ranks talk
// over that link inside the node, and the node's address names its machine,
// whose cores (cpu_cores) and the CPU each rank's hop costs (gloo_cpu_per_hop_s)
// bound how fast the collectives of the ranks it holds go
// (scheduler/cluster_snapshot.h Node::host). SnapshotOf also links nodes of one
// address that declare no network link by the slower of their loopback links.
// Nodes on other machines keep their declared (or default) network link, and
// nodes of real GPUs (NCCL) are left as they are.
// Returns whether it applied (the node talks Gloo and measured its link).
bool ApplyGlooLink(const api::Node& n, scheduler::Node* node);

// Devices that may be planned on: nodes whose health is "healthy", minus the
// devices in `busy` ("node:index"), which are kept but marked busy.
scheduler::ClusterSnapshot SnapshotOf(const std::vector<api::Node>& nodes,
                                      const std::set<std::string>& busy);

// What observed compute times correct (scheduler/compute_correction.h): the
// entrypoint and the --width and --image-size its args give ("builtin:colorize-unet
// --image-size=128"), the options that change a step's compute against the profile.
std::string CorrectionKey(const api::JobSpec& spec);

// kInvalidArgument naming the field when the spec cannot become a request.
// opaque: the job runs as one module (JobProfile::opaque): an auto layout
// becomes data parallel. An infer job's image_width x image_height, or a train
// job's --image-size N (N x N), is the request's image size: the cost model
// scales activations and FLOPs by its pixels against the profile's.
Result<scheduler::JobRequest> RequestOf(const api::JobSpec& spec, bool opaque);

// The measured profile of a builtin model or a model file; see
// daemon/controller/profile_cache.h.
using ProfileLookup = std::function<Result<scheduler::ModelProfile>(const ProfileTarget& target)>;

// The profile target a spec is planned by its layers with: the builtin
// model's, or a `model:` train job's file (`model_file`: the entrypoint's
// registered file); nullopt for what is planned with the generic profile.
std::optional<ProfileTarget> LayeredProfileTarget(const api::JobSpec& spec,
                                                  const std::string& model_file = {});

// What a job is planned with.
struct JobProfile {
  scheduler::ModelProfile model;
  bool opaque = false;  // the generic profile: one module, data parallel only
};

// The profile a spec is planned with: a builtin model's, a `model:` train
// job's file's (`model_file`: the entrypoint's registered file), or the
// generic one. The lookup's error passes on (MeasuringProfile while it is
// measured), except that a model file that cannot be profiled is planned
// opaque when the spec's layout allows it (auto, data); for pipeline or
// hybrid it is kFailedPrecondition naming "layout", with the reason.
Result<JobProfile> ProfileOf(const api::JobSpec& spec, const ProfileLookup& lookup,
                             const std::string& model_file = {});

// A builtin model's times as agents measured them on their GPUs
// (snapshot.device_profiles, one profile per device type) joined to `profile`
// under each type (scheduler::AddMeasuredTimes): those devices are planned by
// their own measurements instead of the estimate from their throughput. A
// profile that does not parse or whose layers differ from `profile`'s is left
// out (that type keeps the estimate); model files' profiles are measured on the
// CPU only and get none.
void AddDeviceMeasuredTimes(const scheduler::ClusterSnapshot& snapshot, const api::JobSpec& spec,
                            const std::string& model_file, scheduler::ModelProfile* profile);

// The planner's options for a caller that reads the first plan only (the queue pass,
// the share round): PlannerOptions::fastest_only.
scheduler::PlannerOptions FirstPlanOnly();

// Ranked plans for the spec on the snapshot (with AddDeviceMeasuredTimes). kFailedPrecondition,
// with every layout's reason, when nothing fits; the lookup's error when the model has no profile
// (yet). `options`: the planner's (fastest_only when only the first plan is wanted).
Result<scheduler::PlanSet> PlanJob(const scheduler::ClusterSnapshot& snapshot,
                                   const api::JobSpec& spec, const ProfileLookup& lookup,
                                   const std::string& model_file = {},
                                   const scheduler::PlannerOptions& options = {});

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_CONTROLLER_PLANNING_H_
