// trace_sim: replays a lab's queue of training jobs through the real scheduler
// on a virtual clock, and prints how each queue policy treats the jobs and
// their users.
//
// The scheduler is the daemon's: every placement is decided by the queue pass
// (scheduler/queue_pass.h: order, user limits, head and backfill) with the
// planner (scheduler/planner.h, MakePlans) on the builtin reference profiles
// (scheduler/builtin_profiles.h). The planner's cost model is the job model: a
// job runs steps x the predicted step time of the plan it started with. Jobs
// are rigid: a job keeps the devices of its first plan until it ends (no
// resizing, no preemption, no failures).
//
// Steps:
//   1. Traces: a generated lab day (--seed: ~40 jobs of 4 users, short and
//      long training jobs of the reference models, one user's burst of 15,
//      arrivals over hours), and optionally a lab's own CSV (--trace).
//   2. Clusters: the demo lab (examples/demo-lab's five emulated devices as
//      GPUs of their relative speeds) and a mixed 24-GPU cluster.
//   3. Per trace, cluster and policy (fifo, fair), an event-driven run: at
//      each arrival or completion, finished jobs free their devices, new jobs
//      join the queue, and one queue pass places what it can (as the
//      controller's Tick does; between events nothing changes, so more passes
//      would decide the same).
//   4. Per run: average and p99 job completion time (JCT: submission to end),
//      makespan, the devices' utilization while any job waits, and per user
//      the worst slowdown (JCT over the job's run time alone on the idle
//      cluster).
//
// Run: build/bench/sched/trace_sim [--seed N] [--load X] [--trace FILE.csv]
//      [--write-trace FILE.csv] [--jobs] (bench/sched/README.md); --round times one
//      scheduling round: 50 waiting jobs on 64 idle devices, planned cold.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/status.h"
#include "scheduler/builtin_profiles.h"
#include "scheduler/planner.h"
#include "scheduler/queue_pass.h"

namespace tessera::scheduler {
namespace {

constexpr double kHour = 3600;
constexpr double kGiB = 1024.0 * 1024 * 1024;

// ---- Step 1: traces ----

// One submitted training job (a CSV row).
struct TraceJob {
  double submit_s = 0;
  std::string user;
  std::string model;  // a builtin profile: colorize-unet, denoiser-dncnn, ...
  int64_t global_batch = 0;
  int64_t steps = 0;
  int64_t min_devices = 1;
  int64_t max_devices = 0;  // 0: no bound
  int64_t priority = 0;
};

struct Trace {
  std::string name;
  std::string about;           // one line
  std::vector<TraceJob> jobs;  // by submission time
};

constexpr const char* kCsvHeader =
    "submit_s,user,model,global_batch,steps,min_devices,max_devices,priority";

// SplitMix64: the same trace for a seed on every platform (the standard
// library's distributions are not portable).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double Uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(Next() >> 11) * 0x1.0p-53;
  }
  int64_t Int(int64_t lo, int64_t hi) {  // [lo, hi]
    return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(Next() % v.size())];
  }

 private:
  uint64_t state_;
};

// A model's usual batches in the lab.
struct ModelUse {
  std::string model;
  std::vector<int64_t> batches;
};

// The reference device job lengths are drawn for: one A100-like GPU.
constexpr double kReferenceTflops = 19.5;
constexpr double kReferenceMemoryGiB = 80;

// The planner's step time of `model` at `batch` alone on the reference device.
double ReferenceStepSeconds(const std::string& model, int64_t batch) {
  ClusterSnapshot one;
  one.nodes.emplace_back();
  one.nodes[0].name = "ref";
  Device d;
  d.type = "reference";
  d.memory_bytes = static_cast<int64_t>(kReferenceMemoryGiB * kGiB);
  d.tflops = kReferenceTflops;
  one.nodes[0].devices.push_back(d);
  JobRequest request;
  request.global_batch = batch;
  Result<PlanSet> plans = MakePlans(one, *BuiltinProfile(model), request);
  if (!plans.ok()) {
    std::cerr << model << " at batch " << batch << ": " << plans.status().ToString() << "\n";
    std::exit(1);
  }
  return plans->plans.front().predicted.step_s;
}

// A lab day: 25 jobs of alice, bob, carol and dave at random times over 8
// hours, and a burst at 1 h: bob submits a sweep of 15 denoiser jobs at once.
// Job lengths are drawn as hours alone on one A100-like GPU (19.5 TFLOPS) and
// become steps of the model at its batch: 7 in 10 are short (5-45 min, on 1-2
// devices), the rest long (2-6 h, on up to 4, 8 or any number of devices);
// the sweep's jobs take 15-45 min on 1-2 devices.
// `load` multiplies every length (1: the day as described).
Trace GenerateLabDay(uint64_t seed, double load) {
  Rng rng(seed);
  const std::vector<ModelUse> models = {{"colorize-unet", {16, 32}},
                                        {"denoiser-dncnn", {16, 32}},
                                        {"classifier-resnet", {64, 128}},
                                        {"gan-pix2pix", {8, 16}}};
  const std::vector<std::string> users = {"alice", "bob", "carol", "dave"};
  auto steps_for = [load](const TraceJob& j, double seconds) {
    const double step = ReferenceStepSeconds(j.model, j.global_batch) / load;
    return std::max<int64_t>(100, static_cast<int64_t>(std::round(seconds / step / 100)) * 100);
  };
  Trace trace;
  trace.name = "lab-day";
  for (int i = 0; i < 25; ++i) {
    TraceJob j;
    j.submit_s = std::round(rng.Uniform(0, 8 * kHour));
    j.user = rng.Pick(users);
    const ModelUse& m = rng.Pick(models);
    j.model = m.model;
    j.global_batch = rng.Pick(m.batches);
    if (rng.Uniform(0, 1) < 0.7) {
      j.steps = steps_for(j, rng.Uniform(5, 45) * 60);
      j.max_devices = rng.Int(1, 2);
    } else {
      j.steps = steps_for(j, rng.Uniform(2, 6) * kHour);
      j.max_devices = rng.Pick(std::vector<int64_t>{4, 8, 0});
    }
    trace.jobs.push_back(j);
  }
  for (int i = 0; i < 15; ++i) {
    TraceJob j;
    j.submit_s = 1 * kHour;
    j.user = "bob";
    j.model = "denoiser-dncnn";
    j.global_batch = 16;
    j.steps = steps_for(j, rng.Uniform(15, 45) * 60);
    j.max_devices = 2;
    trace.jobs.push_back(j);
  }
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.submit_s < b.submit_s; });
  char load_text[48] = "";
  if (load != 1) std::snprintf(load_text, sizeof load_text, ", every job %gx as long", load);
  trace.about = "generated, seed " + std::to_string(seed) +
                ": 25 jobs of 4 users over 8 h, and bob's burst of 15 at 1 h" + load_text;
  return trace;
}

std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream s(line);
  std::string cell;
  while (std::getline(s, cell, ',')) {
    const auto b = cell.find_first_not_of(" \t\r");
    const auto e = cell.find_last_not_of(" \t\r");
    out.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
  }
  if (!line.empty() && line.back() == ',') out.push_back("");
  return out;
}

Result<int64_t> ParseInt(const std::string& s, const std::string& field) {
  try {
    size_t used = 0;
    const long long v = std::stoll(s, &used);
    if (used == s.size()) return static_cast<int64_t>(v);
  } catch (const std::exception&) {
  }
  return InvalidArgument("not an integer: '" + s + "'", field);
}

// The CSV: the header line kCsvHeader, then one job a line; '#' lines and
// blank lines are skipped.
Result<Trace> ReadTrace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read " + path);
  Trace trace;
  trace.name = path.substr(path.find_last_of('/') + 1);
  std::string line;
  int line_no = 0;
  bool header = false;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.front() == '#') continue;
    const std::string at = path + ":" + std::to_string(line_no) + ": ";
    if (!header) {
      if (line != kCsvHeader) return InvalidArgument(at + "the header must be " + kCsvHeader);
      header = true;
      continue;
    }
    const std::vector<std::string> cells = SplitCsv(line);
    if (cells.size() != 8) return InvalidArgument(at + "8 fields expected");
    TraceJob j;
    try {
      size_t used = 0;
      j.submit_s = std::stod(cells[0], &used);
      if (used != cells[0].size() || !(j.submit_s >= 0)) throw std::invalid_argument("");
    } catch (const std::exception&) {
      return InvalidArgument(at + "submit_s: not a time >= 0: '" + cells[0] + "'", "submit_s");
    }
    j.user = cells[1];
    j.model = cells[2];
    if (j.user.empty()) return InvalidArgument(at + "user is empty", "user");
    if (!BuiltinProfile(j.model).ok()) {
      return InvalidArgument(at + "model: not a builtin model: '" + j.model + "'", "model");
    }
    const char* names[] = {"global_batch", "steps", "min_devices", "max_devices", "priority"};
    int64_t* fields[] = {&j.global_batch, &j.steps, &j.min_devices, &j.max_devices, &j.priority};
    for (int f = 0; f < 5; ++f) {
      Result<int64_t> v = ParseInt(cells[3 + f], names[f]);
      if (!v.ok()) return InvalidArgument(at + names[f] + ": " + v.status().message(), names[f]);
      *fields[f] = *v;
    }
    if (j.global_batch < 1 || j.steps < 1 || j.min_devices < 1 || j.max_devices < 0 ||
        (j.max_devices > 0 && j.max_devices < j.min_devices)) {
      return InvalidArgument(at +
                             "need global_batch >= 1, steps >= 1, min_devices >= 1 and "
                             "max_devices 0 or >= min_devices");
    }
    trace.jobs.push_back(j);
  }
  if (trace.jobs.empty()) return InvalidArgument(path + ": no jobs");
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.submit_s < b.submit_s; });
  std::set<std::string> users;
  for (const TraceJob& j : trace.jobs) users.insert(j.user);
  trace.about = "from " + path + ": " + std::to_string(trace.jobs.size()) + " jobs of " +
                std::to_string(users.size()) + " users";
  return trace;
}

Status WriteTrace(const Trace& trace, const std::string& path) {
  std::ofstream out(path);
  out << "# " << trace.about << "\n" << kCsvHeader << "\n";
  for (const TraceJob& j : trace.jobs) {
    out << j.submit_s << "," << j.user << "," << j.model << "," << j.global_batch << "," << j.steps
        << "," << j.min_devices << "," << j.max_devices << "," << j.priority << "\n";
  }
  out.close();
  return out ? Status::Ok() : Internal("cannot write " + path);
}

// ---- Step 2: clusters ----

struct Cluster {
  std::string name;
  std::string about;
  ClusterSnapshot snapshot;
};

Device Gpu(int index, const std::string& type, double mem_gib, double tflops) {
  Device d;
  d.index = index;
  d.type = type;
  d.memory_bytes = static_cast<int64_t>(mem_gib * kGiB);
  d.tflops = tflops;
  return d;
}

// examples/demo-lab: boxa 2 x A100-80GB (speed 0.5), boxb 1 x RTX4090-24GB
// (0.4), boxc 2 x GTX1080-8GB (0.175), with the declared memory. The speeds
// are units of one host core; here one unit is 39 TFLOPS, so the A100 has an
// A100's 19.5. The nodes' links are the planner's defaults (PCIe, 10 GbE).
Cluster DemoLab() {
  constexpr double kTflopsPerSpeed = 39;
  Cluster c{"demo-lab", "examples/demo-lab: 2 A100 (80 GiB), 1 RTX4090 (24), 2 GTX1080 (8)", {}};
  auto node = [&](const std::string& name, const std::string& type, int n, double mem_gib,
                  double speed) {
    Node nd;
    nd.name = name;
    for (int i = 0; i < n; ++i)
      nd.devices.push_back(Gpu(i, type, mem_gib, speed * kTflopsPerSpeed));
    c.snapshot.nodes.push_back(std::move(nd));
  };
  node("boxa", "A100-80GB", 2, 80, 0.5);
  node("boxb", "RTX4090-24GB", 1, 24, 0.4);
  node("boxc", "GTX1080-8GB", 2, 8, 0.175);
  return c;
}

// GPUs of three types in 4-GPU boxes, `boxes[t]` boxes of type t, by
// throughput and memory relative to an A100-like 19.5 TFLOPS / 80 GiB:
// V100-like 0.8 x / 32 GiB, T4-like 0.4 x / 16 GiB; PCIe in a box,
// 25 Gbit/s between boxes.
Cluster MixedCluster(std::string name, std::string about, const std::array<int, 3>& boxes) {
  Cluster c{std::move(name), std::move(about), {}};
  struct Type {
    const char* name;
    double relative;
    double mem_gib;
  };
  const Type types[] = {{"a100", 1.0, 80}, {"v100", 0.8, 32}, {"t4", 0.4, 16}};
  for (size_t t = 0; t < 3; ++t) {
    for (int box = 0; box < boxes[t]; ++box) {
      Node nd;
      nd.name = std::string(types[t].name) + "-" + std::to_string(box);
      nd.network = Link{25e9 / 8, 20e-6};
      for (int i = 0; i < 4; ++i) {
        nd.devices.push_back(Gpu(i, types[t].name, types[t].mem_gib, 19.5 * types[t].relative));
      }
      c.snapshot.nodes.push_back(std::move(nd));
    }
  }
  return c;
}

// 24 GPUs: two boxes of each type.
Cluster Mixed24() {
  return MixedCluster("mixed-24",
                      "8 A100-like (19.5 TFLOPS, 80 GiB), 8 V100-like (15.6, 32), "
                      "8 T4-like (7.8, 16), 4 a box, 25 Gbit/s",
                      {2, 2, 2});
}

// 64 GPUs for the round-time check: 16 boxes of 4 (6 A100-like, 5 V100-like,
// 5 T4-like).
Cluster Mixed64() {
  return MixedCluster("mixed-64", "16 boxes of 4: 6 A100-like, 5 V100-like, 5 T4-like", {6, 5, 5});
}

// ---- Step 3: the run ----

// MakePlans, remembered by job shape and busy devices (jobs of one shape are
// planned once per cluster state).
class Planner {
 public:
  explicit Planner(const ClusterSnapshot& cluster) : cluster_(cluster) {
    for (const std::string& m : BuiltinProfileNames()) profiles_.emplace(m, *BuiltinProfile(m));
  }

  Result<PlanSet> Plan(const TraceJob& job, int64_t max_devices, const DeviceSet& busy) {
    std::string key = job.model + "|" + std::to_string(job.global_batch) + "|" +
                      std::to_string(job.min_devices) + "|" + std::to_string(max_devices);
    for (const std::string& d : busy) key += "|" + d;
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    ++plans_made_;
    ClusterSnapshot snap = cluster_;
    for (Node& n : snap.nodes) {
      for (Device& d : n.devices) d.busy = busy.contains(DeviceId{n.name, d.index}.ToString());
    }
    JobRequest request;
    request.kind = JobKind::kTrain;
    request.global_batch = job.global_batch;
    request.min_devices = static_cast<int>(job.min_devices);
    request.max_devices = static_cast<int>(max_devices);
    Result<PlanSet> plans = MakePlans(snap, profiles_.at(job.model), request);
    if (plans.ok()) {
      // The pass needs the best plan only; keep the cache small.
      plans->plans.resize(std::min<size_t>(plans->plans.size(), 1));
      plans->rejected.clear();
      plans->baselines.clear();
    }
    return cache_.emplace(std::move(key), std::move(plans)).first->second;
  }
  int64_t plans_made() const { return plans_made_; }

 private:
  const ClusterSnapshot& cluster_;
  std::map<std::string, ModelProfile> profiles_;
  std::map<std::string, Result<PlanSet>> cache_;
  int64_t plans_made_ = 0;
};

struct JobOutcome {
  double alone_s = 0;  // run time alone on the idle cluster; 0: it never fits
  double start_s = -1;
  double end_s = -1;
  std::string plan;     // "data x2 on boxa:0,boxa:1"
  std::string why_not;  // never planned / never fits / never started
};

struct Run {
  std::string policy;
  std::vector<JobOutcome> jobs;   // by trace index
  double busy_while_waiting = 0;  // device-seconds busy while a job waited
  double time_waiting = 0;        // seconds with a job waiting
  int devices = 0;
  double makespan_s = 0;
};

std::string PlanText(const Plan& p) {
  std::string out =
      std::string(LayoutName(p.layout)) + " x" + std::to_string(p.Devices().size()) + " on ";
  bool first = true;
  for (const DeviceId& d : p.Devices()) {
    out += (first ? "" : ",") + d.ToString();
    first = false;
  }
  return out;
}

Run Simulate(const Trace& trace, const Cluster& cluster, QueueOrdering ordering, Planner* planner) {
  Run run;
  run.policy = ordering == QueueOrdering::kFifo ? "fifo" : "fair";
  run.devices = cluster.snapshot.DeviceCount();
  run.jobs.resize(trace.jobs.size());
  // Each job alone on the idle cluster; a job that fits nowhere is never queued.
  for (size_t i = 0; i < trace.jobs.size(); ++i) {
    const TraceJob& j = trace.jobs[i];
    Result<PlanSet> alone = planner->Plan(j, j.max_devices, {});
    if (alone.ok() && !alone->plans.empty()) {
      run.jobs[i].alone_s = static_cast<double>(j.steps) * alone->plans.front().predicted.step_s;
    } else {
      run.jobs[i].why_not = "never fits: " + (alone.ok() ? "no plan" : alone.status().message());
    }
  }

  struct Running {
    size_t job;
    double end_s;
    std::vector<std::string> devices;
  };
  std::vector<Running> running;
  std::vector<size_t> waiting;  // trace indices
  std::map<std::string, UserUsage> usage;
  DeviceSet busy;
  const UserPolicies policies;  // every user weight 1, no limits
  size_t next_arrival = 0;
  const double start = trace.jobs.front().submit_s;
  double now = start;
  double last_end = start;

  QueuePassHooks hooks;
  hooks.plan = [&](const PassJob& job, const DeviceSet& b) {
    return planner->Plan(trace.jobs[static_cast<size_t>(job.id - 1)], job.max_devices, b);
  };

  while (true) {
    // Jobs that ended free their devices; new jobs join the queue.
    for (auto it = running.begin(); it != running.end();) {
      if (it->end_s > now + 1e-9) {
        ++it;
        continue;
      }
      const TraceJob& j = trace.jobs[it->job];
      for (const std::string& d : it->devices) busy.erase(d);
      usage[j.user].running_jobs -= 1;
      usage[j.user].devices -= static_cast<int64_t>(it->devices.size());
      it = running.erase(it);
    }
    while (next_arrival < trace.jobs.size() && trace.jobs[next_arrival].submit_s <= now + 1e-9) {
      if (run.jobs[next_arrival].alone_s > 0) waiting.push_back(next_arrival);
      ++next_arrival;
    }
    // One queue pass.
    if (!waiting.empty() && busy.size() < static_cast<size_t>(run.devices)) {
      std::vector<PassJob> queue;
      for (size_t i : waiting) {
        const TraceJob& j = trace.jobs[i];
        queue.push_back(
            PassJob{static_cast<int64_t>(i) + 1, j.user, j.priority, j.min_devices, j.max_devices});
      }
      Result<std::vector<PassDecision>> decisions =
          RunQueuePass(queue, usage, policies, busy, hooks, ordering);
      if (!decisions.ok()) {
        std::cerr << "queue pass: " << decisions.status().ToString() << "\n";
        std::exit(1);
      }
      for (const PassDecision& d : *decisions) {
        const size_t i = static_cast<size_t>(d.job.id - 1);
        if (d.action == PassAction::kNever) {
          run.jobs[i].why_not = d.reason;
        } else if (d.action != PassAction::kPlace) {
          continue;
        } else {
          const TraceJob& j = trace.jobs[i];
          Running r{i, now + static_cast<double>(j.steps) * d.plan->predicted.step_s, {}};
          for (const DeviceId& dev : d.plan->Devices()) r.devices.push_back(dev.ToString());
          busy.insert(r.devices.begin(), r.devices.end());
          usage[j.user].running_jobs += 1;
          usage[j.user].devices += static_cast<int64_t>(r.devices.size());
          run.jobs[i].start_s = now;
          run.jobs[i].end_s = r.end_s;
          run.jobs[i].plan = PlanText(*d.plan);
          last_end = std::max(last_end, r.end_s);
          running.push_back(std::move(r));
        }
        std::erase(waiting, i);
      }
    }
    // The next event.
    double next = std::numeric_limits<double>::infinity();
    if (next_arrival < trace.jobs.size()) next = trace.jobs[next_arrival].submit_s;
    for (const Running& r : running) next = std::min(next, r.end_s);
    if (std::isinf(next)) break;
    if (!waiting.empty()) {
      run.time_waiting += next - now;
      run.busy_while_waiting += (next - now) * static_cast<double>(busy.size());
    }
    now = next;
  }
  for (size_t i : waiting) run.jobs[i].why_not = "never started (waits on an idle cluster)";
  run.makespan_s = last_end - start;
  return run;
}

// ---- Step 4: the report ----

std::string Hours(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f h", s / kHour);
  return buf;
}

void PrintRuns(const Trace& trace, const Cluster& cluster, const std::vector<Run>& runs,
               bool per_job) {
  std::set<std::string> users;
  for (const TraceJob& j : trace.jobs) users.insert(j.user);
  std::printf("\n%s on %s (%d devices: %s)\n", trace.name.c_str(), cluster.name.c_str(),
              cluster.snapshot.DeviceCount(), cluster.about.c_str());
  std::printf("  %-6s %5s %9s %9s %9s %9s %9s  %s\n", "policy", "ran", "avg JCT", "p99 JCT",
              "makespan", "waiting", "util/wait", "worst slowdown per user");
  for (const Run& run : runs) {
    std::vector<double> jct;
    std::map<std::string, double> worst;
    int not_run = 0;
    for (size_t i = 0; i < trace.jobs.size(); ++i) {
      const JobOutcome& o = run.jobs[i];
      if (o.end_s < 0) {
        ++not_run;
        continue;
      }
      const double c = o.end_s - trace.jobs[i].submit_s;
      jct.push_back(c);
      double& w = worst[trace.jobs[i].user];
      w = std::max(w, c / o.alone_s);
    }
    std::sort(jct.begin(), jct.end());
    double avg = 0;
    for (double c : jct) avg += c;
    avg = jct.empty() ? 0 : avg / static_cast<double>(jct.size());
    // p99 by nearest rank (with 40 jobs: the largest).
    const double p99 =
        jct.empty()
            ? 0
            : jct[static_cast<size_t>(std::ceil(0.99 * static_cast<double>(jct.size()))) - 1];
    const double util =
        run.time_waiting > 0 ? run.busy_while_waiting / (run.time_waiting * run.devices) : 0;
    std::string slow;
    for (const std::string& u : users) {
      char buf[64];
      if (worst.contains(u)) {
        std::snprintf(buf, sizeof buf, "%s %.1fx", u.c_str(), worst[u]);
      } else {
        std::snprintf(buf, sizeof buf, "%s -", u.c_str());
      }
      slow += (slow.empty() ? "" : "  ") + std::string(buf);
    }
    char ran[16];
    std::snprintf(ran, sizeof ran, "%zu/%zu", jct.size(), trace.jobs.size());
    char util_text[16] = "-";
    if (run.time_waiting > 0) std::snprintf(util_text, sizeof util_text, "%.1f%%", 100 * util);
    std::printf("  %-6s %5s %9s %9s %9s %9s %9s  %s\n", run.policy.c_str(), ran, Hours(avg).c_str(),
                Hours(p99).c_str(), Hours(run.makespan_s).c_str(), Hours(run.time_waiting).c_str(),
                util_text, slow.c_str());
    if (not_run > 0) {
      for (size_t i = 0; i < trace.jobs.size(); ++i) {
        if (run.jobs[i].end_s < 0) {
          std::printf("         job %zu (%s, %s): %s\n", i + 1, trace.jobs[i].user.c_str(),
                      trace.jobs[i].model.c_str(), run.jobs[i].why_not.c_str());
        }
      }
    }
  }
  if (!per_job) return;
  for (const Run& run : runs) {
    std::printf("  jobs, %s:\n", run.policy.c_str());
    for (size_t i = 0; i < trace.jobs.size(); ++i) {
      const TraceJob& j = trace.jobs[i];
      const JobOutcome& o = run.jobs[i];
      std::printf(
          "    %3zu %-6s %-17s b%-4lld %6lld steps  submit %6.2f h  start %6.2f h  end "
          "%6.2f h  alone %6.2f h  %s\n",
          i + 1, j.user.c_str(), j.model.c_str(), static_cast<long long>(j.global_batch),
          static_cast<long long>(j.steps), j.submit_s / kHour, o.start_s / kHour, o.end_s / kHour,
          o.alone_s / kHour, o.end_s < 0 ? o.why_not.c_str() : o.plan.c_str());
    }
  }
}

// One scheduling round as tesserad runs it when its plan cache is cold: a queue
// pass over `jobs` waiting jobs (the first of generated lab days) on Mixed64's
// idle devices, every job planned afresh. Prints the median and the slowest of
// `rounds` rounds.
void TimeRounds(size_t jobs, int rounds) {
  const Cluster cluster = Mixed64();
  std::vector<TraceJob> queue;
  for (uint64_t seed = 1; queue.size() < jobs; ++seed) {
    for (const TraceJob& j : GenerateLabDay(seed, 1).jobs) {
      if (queue.size() < jobs) queue.push_back(j);
    }
  }
  std::vector<PassJob> pass;
  for (size_t i = 0; i < queue.size(); ++i) {
    const TraceJob& j = queue[i];
    pass.push_back(
        PassJob{static_cast<int64_t>(i) + 1, j.user, j.priority, j.min_devices, j.max_devices});
  }
  std::vector<double> ms;
  size_t placed = 0;
  int64_t plans = 0;
  for (int r = 0; r < rounds; ++r) {
    Planner planner(cluster.snapshot);  // cold: no plan remembered
    QueuePassHooks hooks;
    hooks.plan = [&](const PassJob& job, const DeviceSet& busy) {
      return planner.Plan(queue[static_cast<size_t>(job.id - 1)], job.max_devices, busy);
    };
    const auto t0 = std::chrono::steady_clock::now();
    Result<std::vector<PassDecision>> d = RunQueuePass(pass, {}, UserPolicies{}, {}, hooks);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!d.ok()) {
      std::cerr << "queue pass: " << d.status().ToString() << "\n";
      std::exit(1);
    }
    placed = 0;
    for (const PassDecision& x : *d) placed += x.action == PassAction::kPlace ? 1 : 0;
    plans = planner.plans_made();
  }
  std::sort(ms.begin(), ms.end());
  std::printf(
      "round: %zu waiting jobs on %d idle devices (%s), plans made cold: median %.1f ms, "
      "slowest %.1f ms of %d rounds; %zu placed and %lld plans made per round\n",
      queue.size(), cluster.snapshot.DeviceCount(), cluster.name.c_str(), ms[ms.size() / 2],
      ms.back(), rounds, placed, static_cast<long long>(plans));
}

int Main(int argc, char** argv) {
  uint64_t seed = 1;
  double load = 1;
  std::optional<std::string> trace_path;
  std::optional<std::string> write_path;
  bool per_job = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    auto number = [&](auto parse) {
      const std::string v = value();
      try {
        size_t used = 0;
        auto n = parse(v, &used);
        if (used == v.size()) return n;
      } catch (const std::exception&) {
      }
      std::cerr << a << ": not a number: '" << v << "'\n";
      std::exit(2);
    };
    if (a == "--seed") {
      seed = number([](const std::string& v, size_t* used) { return std::stoull(v, used); });
    } else if (a == "--load") {
      load = number([](const std::string& v, size_t* used) { return std::stod(v, used); });
      if (!(load > 0) || !std::isfinite(load)) {
        std::cerr << "--load must be > 0\n";
        return 2;
      }
    } else if (a == "--trace") {
      trace_path = value();
    } else if (a == "--write-trace") {
      write_path = value();
    } else if (a == "--jobs") {
      per_job = true;
    } else if (a == "--round") {
      TimeRounds(50, 5);
      return 0;
    } else {
      std::cerr << "usage: trace_sim [--seed N] [--load X] [--trace FILE.csv] "
                   "[--write-trace FILE.csv] [--jobs] | --round\n  CSV: "
                << kCsvHeader << "\n";
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  const auto began = std::chrono::steady_clock::now();
  std::vector<Trace> traces = {GenerateLabDay(seed, load)};
  if (write_path) {
    Status st = WriteTrace(traces.front(), *write_path);
    if (!st.ok()) {
      std::cerr << st.ToString() << "\n";
      return 1;
    }
  }
  if (trace_path) {
    Result<Trace> t = ReadTrace(*trace_path);
    if (!t.ok()) {
      std::cerr << t.status().ToString() << "\n";
      return 1;
    }
    traces.push_back(*std::move(t));
  }
  std::printf(
      "trace_sim: the queue pass (scheduler/queue_pass.h) and the planner (MakePlans, builtin\n"
      "profiles) on a virtual clock. A job runs steps x its plan's predicted step time. Jobs are\n"
      "RIGID: each keeps the devices of the plan it started with until it ends (no resizing, no\n"
      "preemption). fifo: priority, then submission; fair: priority, then users' device shares.\n"
      "JCT: submission to end; p99 by nearest rank; waiting: time with a job waiting; util/wait:\n"
      "the devices busy in that time; slowdown: JCT / the job's run time alone on the idle "
      "cluster.\n");
  int64_t plans = 0;
  for (const Trace& trace : traces) {
    std::printf("\ntrace %s: %s\n", trace.name.c_str(), trace.about.c_str());
    for (const Cluster& cluster : {DemoLab(), Mixed24()}) {
      Planner planner(cluster.snapshot);
      std::vector<Run> runs;
      for (QueueOrdering o : {QueueOrdering::kFifo, QueueOrdering::kFairShare}) {
        runs.push_back(Simulate(trace, cluster, o, &planner));
      }
      PrintRuns(trace, cluster, runs, per_job);
      plans += planner.plans_made();
    }
  }
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::printf("\n%lld plans made; %.1f s\n", static_cast<long long>(plans), took);
  return 0;
}

}  // namespace
}  // namespace tessera::scheduler

int main(int argc, char** argv) { return tessera::scheduler::Main(argc, argv); }
