// Search: the ranking of the free devices and the order of the layout searches
// (scheduler/search/search.h).
//
// Steps:
//   1. Rank (constructor): the free devices by per-sample whole-model time (ties by
//      device index); nodes by aggregate speed (the sum of 1 / seconds per sample;
//      ties keep node order); each node's devices by speed. by_node_ lists the
//      devices node after node; max_devices_ is the request's cap (0: all).
//   2. Data parallel, when the layout is auto or data (data_search.cc).
//   3. A data_parallel_only model: pipeline and hybrid only get the reason "<model>
//      cannot be split into stages (data parallel only)". Any other: pipeline
//      (pipeline_search.cc), then hybrid (hybrid_search.cc) and the Polish of the best
//      hybrid plan (local_search.cc), each when wanted.
//   4. Tiled, for inference with an image or a forced tiled layout (tiled_search.cc).
// Consider, for every candidate: a device count outside [min_devices, max_devices]
// or an unwanted layout is ignored; else it is counted and evaluated; an infeasible
// one notes its reason; a feasible one replaces its layout's best when strictly faster.
#include "scheduler/search/search.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/planner.h"

namespace tessera::scheduler {

namespace {

constexpr size_t kMaxReasonsPerLayout = 4;

}  // namespace

Search::Search(const CostModel& cm, const JobRequest& req, const PlannerOptions& opt,
               std::vector<int> free_devices)
    : cm_(cm), req_(req), opt_(opt), free_(std::move(free_devices)) {
  const int n = static_cast<int>(free_.size());
  max_devices_ = req.max_devices > 0 ? std::min(req.max_devices, n) : n;
  schedule_ = cm.training() ? Schedule::k1F1B : Schedule::kGPipe;
  by_speed_ = free_;
  std::sort(by_speed_.begin(), by_speed_.end(), [&](int a, int b) {
    const double sa = cm.device(a).model_seconds, sb = cm.device(b).model_seconds;
    if (sa != sb) return sa < sb;
    return a < b;
  });
  // Nodes by aggregate speed, devices inside a node by speed.
  std::map<int, double> node_speed;
  for (int d : free_) node_speed[cm.device(d).node] += 1.0 / cm.device(d).model_seconds;
  for (auto& [node, speed] : node_speed) nodes_.push_back(node);
  std::stable_sort(nodes_.begin(), nodes_.end(),
                   [&](int a, int b) { return node_speed[a] > node_speed[b]; });
  for (int node : nodes_) {
    std::vector<int> devs;
    for (int d : by_speed_) {
      if (cm.device(d).node == node) devs.push_back(d);
    }
    node_devices_.push_back(devs);
    by_node_.insert(by_node_.end(), devs.begin(), devs.end());
  }
}

void Search::Run() {
  if (Wants(Layout::kData)) SearchData();
  if (cm_.data_parallel_only()) {
    // Every replica keeps all layers on one device: nothing to cut.
    const std::string why = (model_name_.empty() ? std::string("the model") : model_name_) +
                            " cannot be split into stages (data parallel only)";
    if (Wants(Layout::kPipeline)) Note(Layout::kPipeline, why);
    if (Wants(Layout::kHybrid)) Note(Layout::kHybrid, why);
  } else {
    RunStaged();
  }
  if (req_.kind == JobKind::kInfer && (Wants(Layout::kTiled)) &&
      (req_.image || req_.layout == Layout::kTiled)) {
    SearchTiled();
  }
}

void Search::RunStaged() {
  if (Wants(Layout::kPipeline)) SearchPipeline();
  if (Wants(Layout::kHybrid)) {
    SearchHybrid();
    Polish(Layout::kHybrid);
  }
}

// Scores a candidate and keeps it if it is the best of its layout.
double Search::Consider(const Candidate& c) {
  int used = 0;
  for (const CandidateReplica& r : c.replicas) used += static_cast<int>(r.stages.size());
  if (used < req_.min_devices || used > max_devices_) return kInf;
  const Layout layout = LayoutOf(c);
  if (!Wants(layout)) return kInf;
  ++evaluated_;
  Evaluation ev = cm_.Evaluate(c);
  if (!ev.feasible) {
    Note(layout, ev.reason);
    return kInf;
  }
  auto it = best_.find(layout);
  if (it == best_.end() || ev.step_s < it->second.second.step_s) {
    best_[layout] = {c, ev};
  }
  return ev.step_s;
}

double Search::Fastest() const {
  double found = kInf;
  for (const auto& [layout, best] : best_) found = std::min(found, best.second.step_s);
  return found;
}

void Search::Note(Layout layout, const std::string& reason) {
  auto& list = reasons_[layout];
  if (list.size() >= kMaxReasonsPerLayout) return;
  if (std::find(list.begin(), list.end(), reason) == list.end()) list.push_back(reason);
}

}  // namespace tessera::scheduler
