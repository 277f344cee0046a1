// Search: the state the planner's layout searches share, and the order they run in.
//
// Purpose: MakePlans (scheduler/planner.cc) filters the free devices, builds one Search
// over them and calls Run, which ranks the devices and searches every layout the
// request wants. The class is written one file per step:
//   search.cc           ranking, the order of the layouts, Consider and Note
//   data_search.cc      data parallel: device subsets, integer batch shares
//   pipeline_search.cc  pipeline: device orders, one layer partition per depth
//   hybrid_search.cc    hybrid: replica groupings, each replica partitioned
//   tiled_search.cc     tiled inference
//   local_search.cc     local searches around the best plan found: the pipeline's
//                       device order (ImprovePipelineOrder) and the full-model
//                       Polish; the micro-batch scans are in local_search.h
// Every candidate goes through Consider, which scores it with CostModel::Evaluate and
// keeps the fastest of its layout (best_); a rejected option leaves a one-line reason
// (Note: at most 4 distinct reasons per layout). After Run, MakePlans reads best_,
// tiled_, reasons_ and evaluated_.
// Internal to the planner: not part of the library's interface.
// Ownership: borrows the CostModel, JobRequest and PlannerOptions; they must outlive
// the Search. Thread safety: none (one Search per MakePlans call, on one thread).
#ifndef TESSERA_SCHEDULER_SEARCH_SEARCH_H_
#define TESSERA_SCHEDULER_SEARCH_SEARCH_H_

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "scheduler/cost_model.h"
#include "scheduler/job_request.h"
#include "scheduler/pipeline_partition.h"
#include "scheduler/plan.h"
#include "scheduler/planner.h"

namespace tessera::scheduler {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

class Search {
 public:
  // Ranks free_devices (search.cc, step 1).
  // REQUIRES: free_devices are distinct indices of cm's devices, not busy, with
  // model_seconds > 0 and memory (MakePlans' filter).
  Search(const CostModel& cm, const JobRequest& req, const PlannerOptions& opt,
         std::vector<int> free_devices);

  // Whether the request's layout (auto or forced) admits layout l.
  bool Wants(Layout l) const { return req_.layout == Layout::kAuto || req_.layout == l; }

  // Searches every wanted layout; results in best_, tiled_, reasons_, evaluated_.
  // REQUIRES: called once, after nominal_px_, halo_px_ and model_name_ are set.
  void Run();

  // Scores a candidate and keeps it if it is the best of its layout. Returns its step
  // time, or infinity when it is infeasible, uses a device count outside
  // [min_devices, max_devices] or has a layout the request does not want.
  double Consider(const Candidate& c);

  // The least step time of the plans kept so far (infinity: none).
  double Fastest() const;

  // Records why an option of `layout` was rejected (duplicates and reasons past the
  // first 4 are dropped).
  void Note(Layout layout, const std::string& reason);

  // Inputs from the ModelProfile, set before Run.
  int nominal_px_ = 256;
  int halo_px_ = 0;
  std::string model_name_;

  // Results, read after Run: candidates scored, the best candidate of every layout
  // with its evaluation, reasons per layout, the tiled plan (not a Candidate).
  int evaluated_ = 0;
  std::map<Layout, std::pair<Candidate, Evaluation>> best_;
  std::map<Layout, std::vector<std::string>> reasons_;
  std::optional<Plan> tiled_;

 private:
  // A replica's stages with per-stage time coefficients (hybrid_search.cc).
  struct ReplicaPart {
    std::vector<CandidateStage> stages;
    std::vector<double> alpha;  // per stage seconds per sample of micro-batch
    std::vector<double> beta;   // per stage fixed seconds per micro-batch
    int64_t cap = 0;            // max replica batch that fits
  };

  // search.cc: pipeline, then hybrid (and its Polish), for models that can be cut.
  void RunStaged();

  // data_search.cc
  void SearchData();
  void TrySubset(std::vector<int> subset);

  // pipeline_search.cc
  // The deepest pipeline searched: min(max_pipeline_stages, max_devices, layers,
  // depth_cap_).
  int MaxStages() const;
  // fastest_only: when no pipeline of 2 stages or more can beat the fastest plan found
  // so far (PipelineStepLowerBound), caps the depth at 1 (the scans of single devices
  // stay) and notes the bound as the pipeline's reason.
  void BoundPipelines();
  std::vector<std::vector<int>> PipelineOrders() const;
  std::vector<std::vector<int>> SubsetOrders(const std::vector<int>& subset) const;
  void SearchPipeline();
  // PartitionLayers(cm_, order, params), remembered in partitions_.
  const std::optional<Partition>& Partitioned(const std::vector<int>& order,
                                              const PartitionParams& params);

  // hybrid_search.cc
  std::optional<std::vector<CandidateStage>> PartReplica(const std::vector<int>& devs, int64_t b,
                                                         int m);
  ReplicaPart Characterize(const std::vector<CandidateStage>& stages, int m) const;
  std::vector<std::vector<int>> ReplicaOrders(const std::vector<int>& devs) const;
  static double ReplicaSeconds(const ReplicaPart& p, int64_t b, int m);
  std::vector<double> Signature(const std::vector<int>& devs) const;
  std::vector<std::vector<std::vector<int>>> HybridGroupings() const;
  void SearchHybrid();
  double HybridAt(const std::vector<std::vector<int>>& grouping,
                  const std::vector<std::vector<double>>& sigs, const std::vector<int>& group,
                  const std::vector<double>& speed, double total_speed, int m);
  std::vector<CandidateStage> MapStages(const ReplicaPart& part,
                                        const std::vector<int>& devs) const;
  std::vector<CandidateStage> MapStages(const std::vector<CandidateStage>& stages,
                                        const std::vector<int>& devs) const;

  // tiled_search.cc
  void SearchTiled();

  // local_search.cc
  void ImprovePipelineOrder();
  void Polish(Layout layout);

  // Inputs and the ranking (search.cc).
  const CostModel& cm_;
  const JobRequest& req_;
  const PlannerOptions& opt_;
  std::vector<int> free_;
  std::vector<int> by_speed_;
  std::vector<int> by_node_;
  std::vector<int> nodes_;
  std::vector<std::vector<int>> node_devices_;
  int max_devices_ = 0;
  int depth_cap_ = std::numeric_limits<int>::max();  // BoundPipelines
  Schedule schedule_ = Schedule::k1F1B;

  // data_search.cc: devices that hold the whole model plus one sample; subsets tried.
  std::set<int> fit_;
  std::set<std::vector<int>> seen_subsets_;

  // pipeline_search.cc: PartitionLayers by (order, batch, micro-batches,
  // replicated), for the search: the same devices in the same order recur
  // across the orders, depths and micro-batch scans of every layout.
  std::map<std::tuple<std::vector<int>, int64_t, int, bool>, std::optional<Partition>> partitions_;
  // The same by the order's shape (ShapeOf): orders of interchangeable devices (a
  // box's identical GPUs in another order) share one partition, renamed.
  std::map<std::tuple<std::vector<double>, int64_t, int, bool>, std::optional<Partition>>
      partitions_by_shape_;
  // PartitionAllDepths(cm_, rev, params, max_stages) by rev's shape, renamed to rev's
  // devices (the pipeline scans' rankings of interchangeable devices share one).
  std::vector<std::optional<Partition>> PartitionedAllDepths(const std::vector<int>& rev,
                                                             const PartitionParams& params,
                                                             int max_stages);
  std::map<std::tuple<std::vector<double>, int64_t, int, bool, int>,
           std::vector<std::optional<Partition>>>
      all_depths_by_shape_;
  // What a layer partition sees of an order's devices: per position its speed
  // class and usable memory, and the links to the next position both ways.
  std::vector<double> ShapeOf(const std::vector<int>& order) const;

  // hybrid_search.cc: replica partitions by (signature, batch, micro-batches).
  std::map<std::tuple<std::vector<double>, int64_t, int>,
           std::optional<std::vector<CandidateStage>>>
      part_memo_;
};

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_SEARCH_SEARCH_H_
