// tessera-predict: the planner's best plan of one layout for a cluster snapshot
// and a worker profile, as scheduler::ToJson(PlanSet) on stdout.
//
//   tessera-predict --snapshot s.json --profile p.json --layout data --global-batch 32
//                   [--optimizer-state-multiplier 1] [--micro-batch-overhead SECONDS]
//                   [--evaluate PLAN.json]
//
// --evaluate: instead of planning, the cost model's prediction of one given plan
// (a plan object as ToJson(Plan) writes it: "micro_batches", "schedule", "replicas":
// [{"batch", "stages":[{"devices":["node:i"], "layers":[b, e]}]}]) as
// {"step_s", "stage_time_s", "allreduce_s", "step_end_s", "stage_memory_bytes"}.
//
// s.json: {"nodes":[{"name",
//                     "intra_node":{"bandwidth_bytes_per_s","latency_s"}, "network":{...},
//                     "devices":[{"index","type","memory_bytes","tflops",
//                                 "memory_bandwidth_bytes_per_s","measured_as",
//                                 "relative_speed"}]}],
//          "node_links":[{"a","b","link":{...}}]}   (every field but names optional)
// p.json: what `tessera-worker profile` prints (scheduler::ModelProfileFromWorkerJson).
// Exit codes: 0 plans printed, 2 bad arguments or input, 1 no feasible plan.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "scheduler/cluster_snapshot.h"
#include "scheduler/cost_model.h"
#include "scheduler/plan_json.h"
#include "scheduler/planner.h"
#include "scheduler/profile_json.h"

namespace {

using nlohmann::json;
using namespace tessera::scheduler;

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream s;
  s << in.rdbuf();
  return json::parse(s.str());
}

Link LinkOf(const json& j, Link fallback) {
  fallback.bandwidth_bytes_per_s = j.value("bandwidth_bytes_per_s", fallback.bandwidth_bytes_per_s);
  fallback.latency_s = j.value("latency_s", fallback.latency_s);
  return fallback;
}

ClusterSnapshot SnapshotOf(const json& j) {
  ClusterSnapshot snap;
  for (const json& n : j.at("nodes")) {
    Node node;
    node.name = n.at("name").get<std::string>();
    if (n.contains("intra_node")) node.intra_node = LinkOf(n["intra_node"], node.intra_node);
    if (n.contains("network")) node.network = LinkOf(n["network"], node.network);
    for (const json& d : n.at("devices")) {
      Device dev;
      dev.index = d.value("index", static_cast<int>(node.devices.size()));
      dev.type = d.value("type", "cpu");
      dev.memory_bytes = d.value("memory_bytes", int64_t{16} << 30);
      dev.tflops = d.value("tflops", 0.0);
      dev.memory_bandwidth_bytes_per_s = d.value("memory_bandwidth_bytes_per_s", 0.0);
      dev.measured_as = d.value("measured_as", "");
      dev.relative_speed = d.value("relative_speed", 1.0);
      node.devices.push_back(std::move(dev));
    }
    snap.nodes.push_back(std::move(node));
  }
  for (const json& l : j.value("node_links", json::array())) {
    snap.node_links.push_back(NodeLink{l.at("a").get<std::string>(), l.at("b").get<std::string>(),
                                       LinkOf(l.at("link"), {})});
  }
  return snap;
}

// The cost model's prediction of one plan (see --evaluate above); exit code as main's.
int EvaluatePlan(const json& plan, const ClusterSnapshot& snapshot, const ModelProfile& profile,
                 const JobRequest& request, const CostModelOptions& options) {
  const CostModel cost = CostModel::Create(snapshot, profile, request, options);
  Candidate c;
  c.micro_batches = plan.at("micro_batches").get<int>();
  c.schedule = plan.value("schedule", "1f1b") == "gpipe" ? Schedule::kGPipe : Schedule::k1F1B;
  for (const json& r : plan.at("replicas")) {
    CandidateReplica rep;
    rep.batch = r.at("batch").get<int64_t>();
    for (const json& st : r.at("stages")) {
      const std::string id = st.at("devices").at(0).get<std::string>();
      int dev = -1;
      for (int i = 0; i < cost.num_devices(); ++i) {
        if (cost.device(i).id.ToString() == id) dev = i;
      }
      if (dev < 0) throw std::runtime_error("unknown device " + id);
      rep.stages.push_back(
          CandidateStage{dev, st.at("layers").at(0).get<int>(), st.at("layers").at(1).get<int>()});
    }
    c.replicas.push_back(std::move(rep));
  }
  const Evaluation ev = cost.Evaluate(c);
  if (!ev.feasible) {
    std::fprintf(stderr, "tessera-predict: infeasible: %s\n", ev.reason.c_str());
    return 1;
  }
  std::cout << json{{"step_s", ev.step_s},
                    {"stage_time_s", ev.stage_time_s},
                    {"allreduce_s", ev.allreduce_s},
                    {"step_end_s", ev.step_end_s},
                    {"stage_memory_bytes", ev.stage_memory_bytes}}
                   .dump()
            << "\n";
  return 0;
}

int Usage(const char* why) {
  std::fprintf(stderr,
               "tessera-predict: %s\nusage: tessera-predict --snapshot S.json --profile P.json "
               "--layout data|pipeline|hybrid|auto --global-batch B "
               "[--optimizer-state-multiplier K] [--micro-batch-overhead S] "
               "[--evaluate PLAN.json]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string snapshot_path, profile_path, layout_name = "auto";
  int64_t global_batch = 0;
  double optimizer_multiplier = -1;
  double micro_overhead = -1;
  std::string evaluate_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return Usage(("missing value for " + arg).c_str());
    const std::string value = argv[++i];
    if (arg == "--snapshot") {
      snapshot_path = value;
    } else if (arg == "--profile") {
      profile_path = value;
    } else if (arg == "--layout") {
      layout_name = value;
    } else if (arg == "--global-batch") {
      global_batch = std::atoll(value.c_str());
    } else if (arg == "--optimizer-state-multiplier") {
      optimizer_multiplier = std::atof(value.c_str());
    } else if (arg == "--micro-batch-overhead") {
      micro_overhead = std::atof(value.c_str());
    } else if (arg == "--evaluate") {
      evaluate_path = value;
    } else {
      return Usage(("unknown option " + arg).c_str());
    }
  }
  if (snapshot_path.empty() || profile_path.empty()) return Usage("--snapshot and --profile");
  auto layout = ParseLayout(layout_name == "any" ? "auto" : layout_name);
  if (!layout) return Usage("unknown layout");
  try {
    const ClusterSnapshot snapshot = SnapshotOf(ReadJson(snapshot_path));
    auto profile = ModelProfileFromWorkerJson(ReadJson(profile_path));
    if (!profile.ok()) return Usage(profile.status().ToString().c_str());
    if (optimizer_multiplier >= 0) profile->optimizer_state_multiplier = optimizer_multiplier;
    JobRequest request;
    request.kind = JobKind::kTrain;
    request.global_batch = global_batch;
    request.layout = *layout;
    PlannerOptions options;
    if (micro_overhead >= 0) options.cost.micro_batch_overhead_s = micro_overhead;
    if (!evaluate_path.empty()) {
      return EvaluatePlan(ReadJson(evaluate_path), snapshot, *profile, request, options.cost);
    }
    auto plans = MakePlans(snapshot, *profile, request, options);
    if (!plans.ok()) {
      std::fprintf(stderr, "tessera-predict: %s\n", plans.status().ToString().c_str());
      return plans.status().code() == tessera::StatusCode::kInvalidArgument ? 2 : 1;
    }
    std::cout << ToJson(*plans).dump(1) << "\n";
    return 0;
  } catch (const std::exception& e) {
    return Usage(e.what());
  }
}
