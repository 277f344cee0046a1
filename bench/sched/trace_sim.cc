// trace_sim: replays a lab's queue of training jobs through the real scheduler
// on a virtual clock, and prints how each policy treats the jobs and their
// users.
//
// The scheduler is the daemon's: the queue pass (scheduler/queue_pass.h) for
// rigid jobs under fifo and fair, the share policy (scheduler/share_policy.h)
// for elastic jobs, both with the planner (scheduler/planner.h, MakePlans) on
// the builtin reference profiles. The planner's cost model is the job model.
//
// Steps:
//   1. Traces (trace.h): a generated lab day (--seed: ~40 jobs of 4 users,
//      short and long training jobs of the reference models, one user's burst
//      of 15, arrivals over hours) or Gavel's Philly-shaped one (--generate
//      philly: Poisson arrivals, lengths 10^x minutes, 1-8 GPUs), and
//      optionally a lab's own CSV (--trace),
//      whose jobs may train the lab's own models (--profile, profile_files.h).
//   2. Clusters (clusters.h): the demo lab (examples/demo-lab's five emulated
//      devices as GPUs of their relative speeds) and a mixed 24-GPU cluster,
//      or instead a lab's own (--cluster FILE.yaml, cluster_file.h); users'
//      weights and limits from the cluster file or --users (tesserad's
//      config's users: block), else every user weight 1 and no limits.
//   3. Per trace, cluster and policy, an event-driven run (run.h): fifo and
//      fair through rigid_run.cc, share through shared_run.cc (moves cost
//      --move-cost seconds; a job moves at most once per --dwell seconds).
//   4. Per run: average and p99 job completion time (JCT: submission to end),
//      makespan, the devices' utilization while any job waits, the moves, and
//      per user the worst slowdown: JCT over the job's run time alone on its
//      user's fair share of the cluster, and JCT over its completion time on
//      its user's own queue (the user's jobs alone on that share, in turn).
//
// Run: build/bench/sched/trace_sim [--seed N] [--load X]
//      [--generate lab-day|philly [--count N] [--rate R] [--user-count U]] [--trace FILE.csv]
//      [--only-trace] [--cluster FILE.yaml]... [--profile [NAME=]FILE.json]...
//      [--users FILE.yaml] [--write-trace FILE.csv]
//      [--move-cost S] [--dwell S] [--jobs]
//      (bench/sched/README.md); --round times one scheduling round of each
//      kind: 50 waiting jobs on 64 idle devices, planned cold.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bench/sched/cluster_file.h"
#include "bench/sched/clusters.h"
#include "bench/sched/profile_files.h"
#include "bench/sched/run.h"
#include "bench/sched/sim_planner.h"
#include "bench/sched/trace.h"
#include "common/status.h"
#include "scheduler/builtin_profiles.h"
#include "scheduler/queue_pass.h"
#include "scheduler/share_policy.h"

namespace tessera::scheduler::sim {
namespace {

std::string Hours(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f h", s / kHour);
  return buf;
}

// ", and profile FILE's NAME (over the builtin)..." for the header.
std::string ProfilesGiven(const std::vector<NamedProfile>& own) {
  std::string out;
  for (const NamedProfile& p : own) {
    out += (out.empty() ? ", and " : ", ") + p.name +
           (BuiltinProfile(p.name).ok() ? " (over the builtin)" : "");
  }
  return out.empty() ? out : out + " from --profile";
}

// Each job's completion time on its user's own queue: the user's jobs alone on
// the user's fair share, one at a time in order of submission, each taking its
// run time there (JobOutcome::share_s). A user's burst waits on itself here as
// it would on a slice of its own (Themis' finish-time fairness takes the same
// reference). 0 for a job that never fits.
std::vector<double> OwnQueueTimes(const Trace& trace, const std::vector<JobOutcome>& jobs) {
  std::vector<size_t> order(trace.jobs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return trace.jobs[a].submit_s < trace.jobs[b].submit_s;
  });
  std::map<std::string, double> free_at;  // when each user's share is next free
  std::vector<double> out(trace.jobs.size(), 0);
  for (size_t i : order) {
    if (jobs[i].share_s <= 0) continue;
    const TraceJob& j = trace.jobs[i];
    double& at = free_at[j.user];
    at = std::max(at, j.submit_s) + jobs[i].share_s;
    out[i] = at - j.submit_s;
  }
  return out;
}

void PrintRuns(const Trace& trace, const Cluster& cluster, const std::vector<Run>& runs,
               bool per_job) {
  std::set<std::string> users;
  for (const TraceJob& j : trace.jobs) users.insert(j.user);
  std::printf("\n%s on %s (%d devices: %s)\n", trace.name.c_str(), cluster.name.c_str(),
              cluster.snapshot.DeviceCount(), cluster.about.c_str());
  // "ran" as "12/12": wide enough for the trace's count.
  const int ran_width =
      std::max(5, 2 * static_cast<int>(std::to_string(trace.jobs.size()).size()) + 1);
  std::printf("  %-9s %*s %9s %9s %9s %9s %9s %5s  %s\n", "policy", ran_width, "ran", "avg JCT",
              "p99 JCT", "makespan", "waiting", "util/wait", "moves",
              "worst slowdown per user: vs fair share / vs own queue on it");
  for (const Run& run : runs) {
    std::vector<double> jct;
    std::map<std::string, double> worst, worst_own;
    const std::vector<double> own = OwnQueueTimes(trace, run.jobs);
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
      w = std::max(w, c / o.share_s);
      double& wo = worst_own[trace.jobs[i].user];
      wo = std::max(wo, c / own[i]);
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
        std::snprintf(buf, sizeof buf, "%s %.1fx/%.1fx", u.c_str(), worst[u], worst_own[u]);
      } else {
        std::snprintf(buf, sizeof buf, "%s -", u.c_str());
      }
      slow += (slow.empty() ? "" : "  ") + std::string(buf);
    }
    char ran[16];
    std::snprintf(ran, sizeof ran, "%zu/%zu", jct.size(), trace.jobs.size());
    char util_text[16] = "-";
    if (run.time_waiting > 0) std::snprintf(util_text, sizeof util_text, "%.1f%%", 100 * util);
    std::printf("  %-9s %*s %9s %9s %9s %9s %9s %5lld  %s\n", run.policy.c_str(), ran_width, ran,
                Hours(avg).c_str(), Hours(p99).c_str(), Hours(run.makespan_s).c_str(),
                Hours(run.time_waiting).c_str(), util_text, static_cast<long long>(run.moves),
                slow.c_str());
    // The job moved most: a lab notices one job moved all day more than the sum.
    size_t most = 0;
    for (size_t i = 1; i < run.jobs.size(); ++i) {
      if (run.jobs[i].moves > run.jobs[most].moves) most = i;
    }
    if (!run.jobs.empty() && run.jobs[most].moves > 1) {
      std::printf("         most changes of one job: %lld (job %zu of %s, %s)\n",
                  static_cast<long long>(run.jobs[most].moves), most + 1,
                  trace.jobs[most].user.c_str(), trace.jobs[most].model.c_str());
    }
    if (run.limit_breaks > 0) {
      std::printf("         users' limits broken %lld times; the first %s\n",
                  static_cast<long long>(run.limit_breaks), run.first_limit_break.c_str());
    }
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
          "    %3zu %-6s %-5s %-17s b%-4lld %6lld steps  submit %6.2f h  start %6.2f h  end "
          "%6.2f h  alone %6.2f h  share %6.2f h  %s\n",
          i + 1, j.user.c_str(), std::string(JobKindName(j.kind)).c_str(), j.model.c_str(),
          static_cast<long long>(j.global_batch), static_cast<long long>(j.steps),
          j.submit_s / kHour, o.start_s / kHour, o.end_s / kHour, o.alone_s / kHour,
          o.share_s / kHour, o.end_s < 0 ? o.why_not.c_str() : o.plan.c_str());
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
    SimPlanner planner(cluster.snapshot);  // cold: no plan remembered
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

  // The share policy's round on the same jobs and devices, cold.
  std::vector<ShareDevice> devices;
  for (const Node& n : cluster.snapshot.nodes) {
    for (const Device& d : n.devices) {
      devices.push_back({DeviceId{n.name, d.index}.ToString(), n.name + "/" + d.type});
    }
  }
  std::vector<AllocJob> alloc;
  for (const PassJob& p : pass) {
    AllocJob a;
    a.id = p.id;
    a.user = p.user;
    a.priority = p.priority;
    a.min_devices = p.min_devices;
    a.max_devices = p.max_devices;
    alloc.push_back(std::move(a));
  }
  ms.clear();
  std::vector<double> warm_ms;
  int64_t calls = 0;
  for (int r = 0; r < rounds; ++r) {
    SimPlanner planner(cluster.snapshot);
    ShareHooks hooks;
    hooks.rate = [&](const AllocJob& job, const DeviceSet& on) {
      return planner.Rate(queue[static_cast<size_t>(job.id - 1)], job.max_devices, on);
    };
    const auto t0 = std::chrono::steady_clock::now();
    Result<Allocation> a = Allocate(alloc, devices, UserPolicies{}, hooks);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    // The next round on the same jobs: the planner remembers every answer.
    const auto t1 = std::chrono::steady_clock::now();
    Result<Allocation> again = Allocate(alloc, devices, UserPolicies{}, hooks);
    warm_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count());
    if (!a.ok() || !again.ok()) {
      std::cerr << "allocation: " << (a.ok() ? again : a).status().ToString() << "\n";
      std::exit(1);
    }
    placed = 0;
    for (const AllocDecision& x : a->jobs) placed += x.action == AllocAction::kStart ? 1 : 0;
    plans = planner.plans_made();
    calls = a->rate_calls;
  }
  std::sort(ms.begin(), ms.end());
  std::sort(warm_ms.begin(), warm_ms.end());
  std::printf(
      "share round: the same jobs and devices, plans made cold: median %.1f ms, slowest %.1f ms "
      "of %d rounds; %zu started, %lld throughputs asked and %lld plans made per round; the "
      "round after it (plans remembered): median %.1f ms\n",
      ms[ms.size() / 2], ms.back(), rounds, placed, static_cast<long long>(calls),
      static_cast<long long>(plans), warm_ms[warm_ms.size() / 2]);
}

int Main(int argc, char** argv) {
  uint64_t seed = 1;
  double load = 1;
  std::optional<std::string> trace_path;
  std::vector<NamedProfile> own_profiles;
  std::string generate = "lab-day";
  int64_t count = 40;
  double rate = 0.2;
  int64_t user_count = 4;
  bool philly_flags = false;  // --count, --rate or --user-count given
  std::optional<std::string> write_path;
  std::vector<Cluster> clusters;
  std::optional<UserPolicies> users;
  bool per_job = false;
  bool only_trace = false;
  SharedOptions shared;
  shared.grow_min_speedup = 1.2;  // tesserad's grow_min_speedup
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
    // A number > 0 (>= 0 with `zero_ok`), else exit 2 naming the flag.
    auto real = [&](bool zero_ok, const char* unit) {
      const double v =
          number([](const std::string& t, size_t* used) { return std::stod(t, used); });
      if (!std::isfinite(v) || v < 0 || (v == 0 && !zero_ok)) {
        std::cerr << a << " must be " << (zero_ok ? ">= 0 " : "> 0 ") << unit << "\n";
        std::exit(2);
      }
      return v;
    };
    // A whole number in [lo, hi], else exit 2 naming the flag.
    auto whole = [&](int64_t lo, int64_t hi, const char* unit) {
      const int64_t v =
          number([](const std::string& t, size_t* used) { return std::stoll(t, used); });
      if (v < lo || v > hi) {
        std::cerr << a << ": " << lo << " to " << hi << " " << unit << "\n";
        std::exit(2);
      }
      return v;
    };
    // What `reader` makes of the value (a file), else exit 2 with its error.
    auto read = [&](auto reader) {
      auto r = reader(value());
      if (!r.ok()) {
        std::cerr << a << ": " << r.status().ToString() << "\n";
        std::exit(2);
      }
      return *std::move(r);
    };
    if (a == "--seed") {
      seed = number([](const std::string& v, size_t* used) { return std::stoull(v, used); });
    } else if (a == "--load") {
      load = real(false, "(a factor on every length)");
    } else if (a == "--generate") {
      generate = value();
      if (generate != "lab-day" && generate != "philly") {
        std::cerr << "--generate: lab-day or philly, not '" << generate << "'\n";
        return 2;
      }
    } else if (a == "--count") {
      count = whole(1, 100000, "jobs");
      philly_flags = true;
    } else if (a == "--rate") {
      rate = real(false, "jobs an hour");
      philly_flags = true;
    } else if (a == "--user-count") {
      user_count = whole(1, 1000, "users");
      philly_flags = true;
    } else if (a == "--trace") {
      trace_path = value();
    } else if (a == "--cluster") {
      clusters.push_back(read(ReadClusterFile));
    } else if (a == "--profile") {
      own_profiles.push_back(read(ReadProfileArg));
    } else if (a == "--users") {
      users = read(ReadUsersBlock);
    } else if (a == "--write-trace") {
      write_path = value();
    } else if (a == "--move-cost") {
      shared.move_cost_s = real(true, "seconds");
    } else if (a == "--dwell") {
      shared.min_dwell_s = real(true, "seconds");
    } else if (a == "--only-trace") {
      only_trace = true;
    } else if (a == "--jobs") {
      per_job = true;
    } else if (a == "--round") {
      TimeRounds(50, 5);
      return 0;
    } else {
      std::cerr
          << "usage: trace_sim [--seed N] [--load X] [--generate lab-day|philly [--count N] "
             "[--rate "
             "R] [--user-count U]] [--trace FILE.csv] [--only-trace] [--cluster "
             "FILE.yaml]... [--profile [NAME=]FILE.json]... "
             "[--users FILE.yaml] [--write-trace FILE.csv] [--move-cost S] [--dwell S] [--jobs] | "
             "--round\n  CSV: "
          << kCsvHeader << "," << kCsvImageColumns
          << " (any order; the last six may be left out)\n  kind: train (the default) or infer "
             "(global_batch images a step); images: 0,0 (the profile's own) or the job's\n"
             "  cluster file: name, nodes: [{name, count, network, "
             "intra_node, "
             "gpus: [{type, count, memory, tflops, tflops_half, memory_bandwidth}]}] "
             "(bench/sched/README.md)\n";
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (philly_flags && generate != "philly") {
    std::cerr << "--count, --rate and --user-count shape --generate philly's trace\n";
    return 2;
  }
  const auto began = std::chrono::steady_clock::now();
  if (clusters.empty()) clusters = {DemoLab(), Mixed24()};
  if (users) {
    for (Cluster& c : clusters) c.users = *users;
  }
  std::vector<Trace> traces = {
      generate == "philly"
          ? GeneratePhilly(seed, load, static_cast<int>(count), rate, static_cast<int>(user_count))
          : GenerateLabDay(seed, load)};
  if (write_path) {
    Status st = WriteTrace(traces.front(), *write_path);
    if (!st.ok()) {
      std::cerr << st.ToString() << "\n";
      return 1;
    }
  }
  const std::map<std::string, ModelProfile> profiles = SimProfiles(own_profiles);
  if (trace_path) {
    Result<Trace> t = ReadTrace(*trace_path, &profiles);
    if (!t.ok()) {
      std::cerr << t.status().ToString() << "\n";
      return 1;
    }
    traces.push_back(*std::move(t));
  }
  if (only_trace) {
    if (!trace_path) {
      std::cerr << "--only-trace needs --trace FILE.csv\n";
      return 2;
    }
    traces.erase(traces.begin());  // the generated trace
  }
  std::printf(
      "trace_sim: the scheduler and the planner (MakePlans, builtin profiles%s) on a virtual "
      "clock.\nA job runs its steps at its plan's predicted step time.\n"
      "fifo, fair: the queue pass (scheduler/queue_pass.h); jobs are RIGID, each keeps the "
      "devices\n"
      "of the plan it started with (fifo: priority, then submission; fair: priority, then users'\n"
      "device shares). share: as tesserad, while a job waits the share policy\n"
      "(scheduler/share_policy.h) decides every job's devices; running jobs are shrunk, grown or\n"
      "moved when the predicted gain pays for the move (move cost %.0f s, dwell %.0f s, horizon\n"
      "%.0f s): a move that keeps one of the job's devices re-forms around it, one onto none of\n"
      "them restarts the job from its checkpoint, and a job with more left than a waiting gang\n"
      "job needs goes back to the queue for it (restarting later); a job that would finish over\n"
      "2x its time alone on its fair share swaps its slow device with a job that stays within\n"
      "that (catch-up; both restart); while none waits, running jobs grow onto free devices\n"
      "when that predicts 1.2x their throughput and pays for the move (GrowTraining);\n"
      "share-nr: no restarts, every move keeps one of the job's devices and none goes back to\n"
      "the queue or catches up (tesserad with share_restart_moves: false); share-all:\n"
      "the policy decides free devices too. --jobs: -> requeue, -> restart mark them.\n"
      "Inference jobs (kind infer) run as independent ranks: rigid under fifo and fair; under\n"
      "share the policy starts and shrinks them (dropped ranks' chunks redone: %.0f s), and while\n"
      "none waits they grow onto every free device (GrowInference); under share-all the policy\n"
      "decides their devices too.\n"
      "JCT: submission to end; p99 by nearest rank; waiting: time with a job waiting; util/wait:\n"
      "the devices busy in that time; slowdown vs fair share: JCT / the job's run time alone on\n"
      "its user's fair share (devices x the user's weight / the trace's users' weights, a slice\n"
      "with every device type in proportion; weights 1 unless --users or the cluster file say);\n"
      "vs own queue: JCT / its completion time with its user's jobs alone on that share, one at\n"
      "a time in order of submission (a user's burst waits on itself there too).\n",
      ProfilesGiven(own_profiles).c_str(), shared.move_cost_s, shared.min_dwell_s,
      shared.share.horizon_s, shared.infer_move_cost_s);
  int64_t plans = 0;
  for (const Trace& trace : traces) {
    std::printf("\ntrace %s: %s\n", trace.name.c_str(), trace.about.c_str());
    for (const Cluster& cluster : clusters) {
      SimPlanner planner(cluster.snapshot, profiles);
      std::vector<Run> runs;
      for (QueueOrdering o : {QueueOrdering::kFifo, QueueOrdering::kFairShare}) {
        runs.push_back(SimulateRigid(trace, cluster, o, &planner));
      }
      runs.push_back(SimulateShared(trace, cluster, shared, &planner));
      SharedOptions no_restarts = shared;
      no_restarts.restart_moves = false;
      runs.push_back(SimulateShared(trace, cluster, no_restarts, &planner));
      SharedOptions policy_always = shared;
      policy_always.grow_min_speedup = 0;
      runs.push_back(SimulateShared(trace, cluster, policy_always, &planner));
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
}  // namespace tessera::scheduler::sim

int main(int argc, char** argv) { return tessera::scheduler::sim::Main(argc, argv); }
