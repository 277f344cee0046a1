// replay_bench: a short lab trace replayed against the real cluster (tesserad,
// the demo lab's three agents, the real worker) with the simulator's
// prediction for the same trace beside it (bench/sched: the same scheduler
// code, the planner's cost model as the job model, on the profiles tesserad
// measured and the cluster it sees).
//
// Steps:
//   1. Start tesserad (the daemon's default settings: 1 s heartbeats, the
//      share policy on) and examples/demo-lab's agents boxa, boxb, boxc on
//      loopback, one host as scripts/demo.sh runs them (their ranks share
//      its cores, and tesserad plans them as one machine: scheduler/README.md
//      8a; --netns: each node in a network namespace of its own); give each
//      user of the trace a token; wait until tesserad has measured the
//      profiles of every builtin model (its warm-up at start), so the replay
//      runs on a quiet host: a profile measured while the first jobs run
//      takes cores from their emulated devices (their steps ran ~3x their
//      prediction), and the corrections and re-measurements that follow are
//      of that contention, not of the jobs.
//   2. Size the trace: each job's steps from its length alone (alone_s), by
//      the planner's prediction of the job alone on the idle lab (or as a
//      trace_sim CSV gives them: the same work replayed again).
//   3. Submit each job at its time, as its user; wait until every job ended.
//      A job's JCT is from its creation to its last event.
//   4. Predict: the same jobs at the times they were really submitted,
//      through trace_sim's runs (bench/sched/run.h) on the snapshot of the
//      lab's nodes as tesserad builds it and the profiles it measured:
//      `fair` (the queue pass, rigid jobs) and `share` (the share policy,
//      elastic jobs, moves charged the mean of the re-form costs tesserad
//      measured in the run, else its move_cost_s).
//   5. Print per job the real and predicted JCT, and per run the average JCT
//      and the makespan, with the prediction's error.
// Usage: replay_bench [--trace FILE.csv] [--write-trace FILE.csv] [--config "YAML lines"] [--jobs]
//                     [--netns]
//   FILE.csv: submit_s,user,model,global_batch,alone_s,min_devices,max_devices,priority
//   [,kind], or trace_sim's CSV (steps instead of alone_s; what --write-trace writes).
//   An infer job (kind infer) gets an archive of steps x global_batch scans of its
//   own (64 px) and a model to infer with (two steps of training of its model,
//   outside the cluster); it writes under its user's folder.
//   (without --trace: 8 jobs of 3 users over 105 s, below); --jobs: per job, its
//   events on the real cluster and its devices in each simulation.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/sched/run.h"
#include "bench/sched/sim_planner.h"
#include "bench/sched/trace.h"
#include "daemon/controller/planning.h"
#include "daemon/controller/profile_cache.h"
#include "scheduler/profile_json.h"
#include "tests/integration/harness.h"

using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace tessera::bench {
namespace {

using scheduler::sim::TraceJob;

struct ReplayJob {
  int64_t steps = 0;  // > 0: given (a trace_sim CSV), not sized from alone_s
  double submit_s = 0;
  std::string user;
  std::string model;
  int64_t global_batch = 16;
  double alone_s = 60;
  int64_t min_devices = 1;
  int64_t max_devices = 0;
  int64_t priority = 0;
  scheduler::JobKind kind = scheduler::JobKind::kTrain;
};

// 8 jobs of 3 users over 105 s, each 45-120 s alone on the idle demo lab.
std::vector<ReplayJob> DefaultTrace() {
  return {
      {0, 0, "alice", "colorize-unet", 16, 120, 1, 0, 0},
      {0, 15, "bob", "denoiser-dncnn", 16, 60, 1, 2, 0},
      {0, 30, "carol", "classifier-resnet", 32, 60, 1, 0, 0},
      {0, 45, "bob", "denoiser-dncnn", 16, 60, 1, 2, 0},
      {0, 60, "alice", "colorize-unet", 16, 90, 1, 0, 0},
      {0, 75, "carol", "denoiser-dncnn", 16, 45, 1, 1, 0},
      {0, 90, "bob", "classifier-resnet", 32, 60, 1, 2, 0},
      {0, 105, "alice", "denoiser-dncnn", 16, 45, 1, 1, 0},
  };
}

// The replay format (alone_s), or trace_sim's (steps: e.g. what --write-trace
// wrote, to replay the same work again).
Result<std::vector<ReplayJob>> ReadReplayTrace(const std::string& path) {
  std::string head;
  {
    std::ifstream sniff(path);
    while (std::getline(sniff, head) && (head.empty() || head[0] == '#')) {
    }
  }
  // trace_sim's format has a steps column (in any order), the replay format alone_s.
  if (("," + head + ",").find(",steps,") != std::string::npos) {
    TESSERA_ASSIGN_OR_RETURN(scheduler::sim::Trace t, scheduler::sim::ReadTrace(path));
    std::vector<ReplayJob> out;
    for (const TraceJob& j : t.jobs) {
      out.push_back({j.steps, j.submit_s, j.user, j.model, j.global_batch, 0, j.min_devices,
                     j.max_devices, j.priority, j.kind});
    }
    return out;
  }
  std::ifstream in(path);
  if (!in) return NotFound("cannot read " + path);
  std::vector<ReplayJob> out;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line[0] == '#' || line.rfind("submit_s", 0) == 0) continue;
    std::vector<std::string> cells;
    std::stringstream s(line);
    for (std::string c; std::getline(s, c, ',');) cells.push_back(c);
    if (cells.size() != 8 && cells.size() != 9) {
      return InvalidArgument(path + ":" + std::to_string(n) + ": 8 or 9 columns expected");
    }
    const std::optional<scheduler::JobKind> kind =
        cells.size() == 9 ? scheduler::ParseJobKind(cells[8]) : scheduler::JobKind::kTrain;
    if (!kind) {
      return InvalidArgument(
          path + ":" + std::to_string(n) + ": train or infer, not '" + cells[8] + "'", "kind");
    }
    try {
      out.push_back({0, std::stod(cells[0]), cells[1], cells[2], std::stoll(cells[3]),
                     std::stod(cells[4]), std::stoll(cells[5]), std::stoll(cells[6]),
                     std::stoll(cells[7]), *kind});
    } catch (const std::exception&) {
      return InvalidArgument(path + ":" + std::to_string(n) + ": not a number");
    }
  }
  if (out.empty()) return InvalidArgument(path + ": no job");
  return out;
}

// The lab as tesserad plans on it, every device free.
scheduler::ClusterSnapshot LabSnapshot(testing::Cluster& cluster) {
  std::vector<api::Node> nodes;
  for (const api::Json& j : cluster.GetJson("/api/v1/nodes").value("nodes", api::Json::array())) {
    auto n = api::NodeFromJson(j);
    if (!n.ok()) continue;
    for (api::Device& d : n->devices) d.busy = false;
    nodes.push_back(*std::move(n));
  }
  return daemon::SnapshotOf(nodes, {});
}

// The profiles tesserad measured for `models`, once all are there.
std::optional<std::map<std::string, scheduler::ModelProfile>> WaitForProfiles(
    testing::Cluster& cluster, const std::set<std::string>& models) {
  std::map<std::string, scheduler::ModelProfile> out;
  const fs::path dir = cluster.dir() / "controller" / "profiles";
  const bool all = testing::WaitFor(
      [&] {
        for (const std::string& m : models) {
          if (out.contains(m)) continue;
          const fs::path file = dir / (m + ".json");
          if (!fs::exists(file)) return false;
          auto j = api::Json::parse(testing::ReadText(file), nullptr, false);
          auto p = scheduler::ModelProfileFromWorkerJson(j);
          if (!p.ok()) return false;
          out.emplace(m, *std::move(p));
        }
        return true;
      },
      900s);
  if (!all) return std::nullopt;
  return out;
}

double Seconds(int64_t ms) { return static_cast<double>(ms) / 1000.0; }

int Run(const std::vector<ReplayJob>& replay, const std::string& write_path, bool per_job,
        const std::string& extra_config) {
  testing::Cluster cluster("replay-bench", /*fast=*/false);
  const fs::path shared = cluster.dir() / "data" / "shared";
  const fs::path images = shared / "images";
  testing::Process gen({testing::BinaryPath("tessera-worker"), "gen-images", "--out",
                        images.string(), "--count", "96", "--size", "64"},
                       {}, cluster.dir() / "gen-images.log");
  if (gen.Wait(120s) != 0) {
    std::fprintf(stderr, "gen-images failed: %s\n", gen.Log().c_str());
    return 1;
  }
  // Each user's own folder beside the shared images, for an archive's output.
  const fs::path users = cluster.dir() / "data";
  cluster.StartController("worker_binary: " + testing::BinaryPath("tessera-worker") +
                          "\ndata_roots:\n  - {path: \"" + shared.string() +
                          "\", access: read}\n  - {path: \"" + users.string() +
                          "/{user}\", access: write}\n" + extra_config);
  const fs::path lab = fs::path(TESSERA_SOURCE_DIR) / "examples" / "demo-lab";
  for (const char* n : {"boxa", "boxb", "boxc"}) {
    cluster.StartAgent(n, testing::ReadText(lab / (std::string(n) + ".yaml")));
  }
  if (!cluster.NodesJoin(3, 60s)) {
    std::fprintf(stderr, "the demo lab's nodes did not join\n");
    return 1;
  }
  std::map<std::string, std::string> tokens;
  std::set<std::string> models;
  for (const ReplayJob& j : replay) {
    if (!tokens.contains(j.user)) tokens[j.user] = cluster.UserToken(j.user);
    models.insert(j.model);
  }
  std::set<std::string> warmed = models;
  for (const std::string& m : daemon::BuiltinModelsToProfile()) warmed.insert(m);
  std::printf("waiting for tesserad's profiles of %zu models (the %zu of the trace)...\n",
              warmed.size(), models.size());
  auto profiles = WaitForProfiles(cluster, warmed);
  if (!profiles) {
    std::fprintf(stderr, "tesserad did not measure the profiles:\n%s\n",
                 cluster.controller()->Log().c_str());
    return 1;
  }
  const scheduler::ClusterSnapshot snapshot = LabSnapshot(cluster);
  scheduler::sim::SimPlanner planner(snapshot, *profiles);

  // (2) Steps from each job's length alone.
  scheduler::sim::Trace trace;
  trace.name = "replay";
  trace.about = std::to_string(replay.size()) + " jobs replayed on the demo lab";
  for (const ReplayJob& r : replay) {
    TraceJob t{r.submit_s,    r.user,        r.model,    r.global_batch, 1,
               r.min_devices, r.max_devices, r.priority, r.kind};
    Result<scheduler::PlanSet> alone = planner.Plan(t, r.max_devices, {});
    if (!alone.ok() || alone->plans.empty()) {
      std::fprintf(stderr, "%s does not fit the demo lab: %s\n", r.model.c_str(),
                   alone.ok() ? "no plan" : alone.status().ToString().c_str());
      return 1;
    }
    t.steps = r.steps > 0 ? r.steps
                          : std::max<int64_t>(
                                1, std::llround(r.alone_s / alone->plans.front().predicted.step_s));
    trace.jobs.push_back(t);
  }
  // An archive to infer: steps x global_batch scans of its own, and a model
  // to infer with (two steps of training of each model, outside the cluster).
  std::map<std::string, fs::path> checkpoints;
  for (size_t i = 0; i < trace.jobs.size(); ++i) {
    const TraceJob& t = trace.jobs[i];
    if (t.kind != scheduler::JobKind::kInfer) continue;
    fs::create_directories(users / t.user);  // its output goes below
    const fs::path archive = shared / ("archive-" + std::to_string(i + 1));
    const int count = static_cast<int>(t.steps * t.global_batch);
    if (std::string err = testing::GenImages(archive, count, 64, 600s); !err.empty()) {
      std::fprintf(stderr, "gen-images for job %zu failed: %s\n", i + 1, err.c_str());
      return 1;
    }
    if (checkpoints.contains(t.model)) continue;
    const fs::path ckpt = shared / ("model-" + t.model);
    const std::string err =
        testing::RunTool({testing::BinaryPath("tessera-worker"), "train", "--model", t.model,
                          "--data", images.string(), "--steps", "2", "--image-size", "64",
                          "--batch", "4", "--checkpoint-every-steps", "1"},
                         {{"TESSERA_CHECKPOINT_DIR", ckpt.string()}},
                         cluster.dir() / ("train-" + t.model + ".log"), 300s);
    if (!err.empty()) {
      std::fprintf(stderr, "training a model of %s to infer with failed: %s\n", t.model.c_str(),
                   err.c_str());
      return 1;
    }
    checkpoints[t.model] = ckpt;
  }

  // (3) Replay.
  std::vector<api::JobId> ids;
  const auto t0 = std::chrono::steady_clock::now();
  int64_t first_created_ms = 0;
  for (size_t i = 0; i < trace.jobs.size(); ++i) {
    const TraceJob& t = trace.jobs[i];
    std::this_thread::sleep_until(t0 + std::chrono::milliseconds(std::llround(t.submit_s * 1000)));
    api::Json spec = {{"name", "replay-" + std::to_string(i + 1)},
                      {"entrypoint", "builtin:" + t.model},
                      {"dataset", images.string()},
                      {"global_batch", t.global_batch},
                      {"steps", t.steps},
                      {"checkpoint_every_s", 30},
                      {"min_devices", t.min_devices},
                      {"max_devices", t.max_devices},
                      {"priority", t.priority}};
    if (t.kind == scheduler::JobKind::kInfer) {
      spec = testing::InferJobSpec("replay-" + std::to_string(i + 1), "builtin:" + t.model,
                                   shared / ("archive-" + std::to_string(i + 1)),
                                   users / t.user / ("archive-" + std::to_string(i + 1)), {});
      spec.update({{"checkpoint", checkpoints.at(t.model).string()},
                   {"global_batch", t.global_batch},
                   {"min_devices", t.min_devices},
                   {"max_devices", t.max_devices},
                   {"priority", t.priority}});
    }
    int status = 0;
    api::Json job = cluster.PostJson("/api/v1/jobs", spec, &status, tokens.at(t.user));
    if (status != 201) {
      std::fprintf(stderr, "job %zu refused (%d): %s\n", i + 1, status, job.dump().c_str());
      return 1;
    }
    ids.push_back(job.value("id", api::JobId{0}));
    std::printf("  %6.1f s  job %lld of %s: %s %s, %lld steps of %lld\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                static_cast<long long>(ids.back()), t.user.c_str(),
                std::string(scheduler::JobKindName(t.kind)).c_str(), t.model.c_str(),
                static_cast<long long>(t.steps), static_cast<long long>(t.global_batch));
    std::fflush(stdout);
  }
  const bool ended = testing::WaitFor(
      [&] {
        for (api::JobId id : ids) {
          const std::string s = cluster.JobState(id);
          if (s != "succeeded" && s != "failed" && s != "cancelled") return false;
        }
        return true;
      },
      3600s);
  if (!ended) {
    std::fprintf(stderr, "not every job ended within an hour\n%s\n",
                 cluster.controller()->Log().c_str());
    return 1;
  }
  struct Real {
    double submit_s = 0, end_s = 0;
    std::string state;
    int moves = 0;
    std::string story;  // --jobs: its events past the submission, a line each
  };
  std::vector<Real> real;
  for (size_t i = 0; i < ids.size(); ++i) {
    const api::Json job = cluster.GetJson("/api/v1/jobs/" + std::to_string(ids[i]));
    const int64_t created = job.value("created_ms", int64_t{0});
    if (i == 0) first_created_ms = created;
    Real r;
    r.submit_s = Seconds(created - first_created_ms);
    r.state = job.value("state", "");
    for (const api::Event& e : cluster.Events(ids[i])) {
      r.end_s = std::max(r.end_s, Seconds(e.ts_ms - first_created_ms));
      if (e.reason.find("shrinks to") != std::string::npos ||
          e.reason.find("the job grows") != std::string::npos ||
          e.reason.find(" joins and leases") != std::string::npos ||
          e.reason.find(" join and lease") != std::string::npos ||
          e.reason.find("inference fills the gaps") != std::string::npos ||
          e.reason.find("moves to") != std::string::npos) {
        ++r.moves;
      }
      if (!e.from_state.empty()) {
        char at[32];
        std::snprintf(at, sizeof at, "%7.1f s  ", Seconds(e.ts_ms - first_created_ms));
        r.story += "        real " + std::string(at) + e.from_state + " -> " + e.to_state + ": " +
                   e.reason.substr(0, 160) + "\n";
      }
    }
    real.push_back(r);
    trace.jobs[i].submit_s = r.submit_s;  // (4) the times they really came
  }
  if (!write_path.empty()) {
    if (Status st = scheduler::sim::WriteTrace(trace, write_path); !st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
    }
  }

  // (4) Predict, moves charged what tesserad measured of its re-forms in this
  // run (its log: "... the re-form cost X s"), else its move_cost_s.
  const scheduler::sim::Cluster sim_cluster{"demo-lab", "the lab as tesserad sees it", snapshot};
  scheduler::sim::SharedOptions shared_options;
  std::vector<double> move_costs;
  {
    std::istringstream log(cluster.controller()->Log());
    const std::string mark = "the re-form cost ";
    for (std::string l; std::getline(log, l);) {
      if (const size_t at = l.find(mark); at != std::string::npos) {
        move_costs.push_back(std::atof(l.c_str() + at + mark.size()));
      }
    }
  }
  shared_options.move_cost_s = 10;  // tesserad's move_cost_s
  if (!move_costs.empty()) {
    double sum = 0;
    for (double c : move_costs) sum += c;
    shared_options.move_cost_s = sum / static_cast<double>(move_costs.size());
  }
  std::printf("\n  moves charged %.1f s in the simulation (%s)\n", shared_options.move_cost_s,
              move_costs.empty() ? "tesserad's move_cost_s: no re-form measured"
                                 : (std::to_string(move_costs.size()) +
                                    " re-forms measured by tesserad, their mean")
                                       .c_str());
  shared_options.min_dwell_s = 10;        // its grow_settle_ms
  shared_options.grow_min_speedup = 1.2;  // its grow_min_speedup: growth while none waits
  const scheduler::sim::Run fair = scheduler::sim::SimulateRigid(
      trace, sim_cluster, scheduler::QueueOrdering::kFairShare, &planner);
  const scheduler::sim::Run share =
      scheduler::sim::SimulateShared(trace, sim_cluster, shared_options, &planner);

  // (5) Report.
  std::printf(
      "\n  job user   model                    steps  submit   real JCT  sim share  sim fair  "
      "moves\n");
  double real_sum = 0, share_sum = 0, fair_sum = 0, real_end = 0;
  for (size_t i = 0; i < trace.jobs.size(); ++i) {
    const TraceJob& t = trace.jobs[i];
    const double rj = real[i].end_s - real[i].submit_s;
    const double sj = share.jobs[i].end_s - t.submit_s;
    const double fj = fair.jobs[i].end_s - t.submit_s;
    real_sum += rj;
    share_sum += sj;
    fair_sum += fj;
    real_end = std::max(real_end, real[i].end_s);
    const std::string model = t.kind == scheduler::JobKind::kInfer ? "infer " + t.model : t.model;
    std::printf("  %3zu %-6s %-23s %6lld %6.1f s %8.1f s %8.1f s %8.1f s  %5d  %s\n", i + 1,
                t.user.c_str(), model.c_str(), static_cast<long long>(t.steps), t.submit_s, rj, sj,
                fj, real[i].moves, real[i].state.c_str());
    if (per_job) {
      std::printf("%s        sim share: %s\n        sim fair:  %s\n", real[i].story.c_str(),
                  share.jobs[i].plan.c_str(), fair.jobs[i].plan.c_str());
    }
  }
  const double n = static_cast<double>(trace.jobs.size());
  auto line = [&](const char* what, double avg, double makespan) {
    std::printf("  %-16s avg JCT %7.1f s (%+.1f %% against real)  makespan %7.1f s (%+.1f %%)\n",
                what, avg, 100 * (avg / (real_sum / n) - 1), makespan,
                100 * (makespan / real_end - 1));
  };
  std::printf("\n");
  line("real", real_sum / n, real_end);
  line("sim share", share_sum / n, share.makespan_s);
  line("sim fair", fair_sum / n, fair.makespan_s);
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  CLI::App app{
      "replay a short lab trace on the real demo lab, the simulator's prediction beside it"};
  std::string trace_path, write_path, config;
  bool per_job = false;
  app.add_option("--trace", trace_path,
                 "CSV: submit_s,user,model,global_batch,alone_s,min_devices,max_devices,priority");
  app.add_option("--write-trace", write_path, "the replayed trace in trace_sim's CSV format");
  app.add_option("--config", config,
                 "YAML lines added to tesserad's config, e.g. \"share_running_jobs: false\"");
  app.add_flag("--jobs", per_job,
               "per job, its events on the real cluster and its devices in each simulation");
  bool netns = false;
  app.add_flag("--netns", netns,
               "run each node in its own network namespace, a machine of its own to the planner "
               "(default: every node on loopback, one host, as scripts/demo.sh runs the lab)");
  CLI11_PARSE(app, argc, argv);
  // The test harness's switch (tests/integration/harness.h).
  if (!netns) ::setenv("TESSERA_TEST_NO_NETNS", "1", 1);
  if (!config.empty() && config.back() != '\n') config += '\n';
  std::vector<tessera::bench::ReplayJob> trace = tessera::bench::DefaultTrace();
  if (!trace_path.empty()) {
    auto read = tessera::bench::ReadReplayTrace(trace_path);
    if (!read.ok()) {
      std::fprintf(stderr, "%s\n", read.status().ToString().c_str());
      return 2;
    }
    trace = *std::move(read);
  }
  return tessera::bench::Run(trace, write_path, per_job, config);
}
