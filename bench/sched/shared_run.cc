// Elastic jobs through the share policy (run.h).
//
// Steps:
//   1. Each job's work is its steps x global batch samples; it runs at the
//      throughput the policy predicted for its devices (the planner's cost
//      model: global batch / predicted step time).
//   2. At each arrival, completion or end of a dwell time (a running job may
//      move again), the clock advances every running job's work, ended jobs
//      free their devices, new jobs join, and one allocation
//      (scheduler/share_policy.h, Allocate) decides every job's devices: a
//      running job may move once min_dwell_s has passed since its start or
//      last move, and the policy charges move_cost_s for it.
//      With grow_min_speedup > 0 (tesserad's rules) the allocation runs only
//      while a job waits; otherwise each running job that may move grows onto
//      free devices when that pays (GrowOntoFreeDevices).
//   3. Decisions take effect at once: a started job runs from now; a job
//      shrunk, grown or moved makes no progress for move_cost_s (checkpoint or
//      state transfer, restart) and then runs at its new throughput.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <map>

#include "bench/sched/run.h"
#include "scheduler/share_policy.h"

namespace tessera::scheduler::sim {

namespace {

struct Live {
  bool running = false;
  DeviceSet devices;
  double rate = 0;          // samples per second
  double work_left = 0;     // samples
  double paused_until = 0;  // a move's cost ends
  double moved_at = 0;      // last start or move
};

std::string DevicesText(const DeviceSet& devices) {
  std::string out = "x" + std::to_string(devices.size()) + " on ";
  bool first = true;
  for (const std::string& d : devices) {
    out += (first ? "" : ",") + d;
    first = false;
  }
  return out;
}

// Marks `l` moved onto `devices` at `rate` now (the move's cost paused).
void ApplyMove(double now, const SharedOptions& options, const char* action,
               const DeviceSet& devices, double rate, Live& l, JobOutcome& outcome, Run& run) {
  l.devices = devices;
  l.rate = rate;
  l.paused_until = std::max(now, l.paused_until) + options.move_cost_s;
  l.moved_at = now;
  outcome.plan += std::string(" -> ") + action + " " + DevicesText(devices);
  ++run.moves;
}

// tesserad's growth while no job waits (JobController::GrowTraining): each
// running job that may move, in submission order, planned on its own devices
// and the free ones; it takes that plan's devices when they add one, its
// throughput rises grow_min_speedup times, and the time saved over its
// remaining work exceeds the move's cost.
void GrowOntoFreeDevices(double now, const Trace& trace, const std::vector<ShareDevice>& devices,
                         const SharedOptions& options, SimPlanner* planner,
                         std::map<size_t, Live>& live, Run& run) {
  DeviceSet free;
  for (const ShareDevice& d : devices) free.insert(d.id);
  for (const auto& [i, l] : live) {
    for (const std::string& d : l.devices) free.erase(d);
  }
  for (auto& [i, l] : live) {
    if (free.empty()) return;
    if (!l.running || now - l.moved_at < options.min_dwell_s - 1e-9 || !(l.rate > 0)) continue;
    DeviceSet wider = l.devices;
    wider.insert(free.begin(), free.end());
    const TraceJob& t = trace.jobs[i];
    Result<RateOnDevices> grown = planner->Rate(t, t.max_devices, wider);
    if (!grown.ok() || !(grown->rate >= l.rate * options.grow_min_speedup)) continue;
    bool gains = false;
    for (const std::string& d : grown->used) gains = gains || !l.devices.contains(d);
    const double saved_s = l.work_left / l.rate - l.work_left / grown->rate;
    if (!gains || saved_s <= options.move_cost_s) continue;
    for (const std::string& d : grown->used) free.erase(d);
    for (const std::string& d : l.devices) {
      if (!grown->used.contains(d)) free.insert(d);
    }
    ApplyMove(now, options, "grow", grown->used, grown->rate, l, run.jobs[i], run);
  }
}

}  // namespace

Run SimulateShared(const Trace& trace, const Cluster& cluster, const SharedOptions& options,
                   SimPlanner* planner) {
  Run run;
  run.policy = std::string(options.grow_min_speedup > 0 ? "share" : "share-all") +
               (options.restart_moves ? "" : "-nr");
  run.devices = cluster.snapshot.DeviceCount();
  run.jobs = AloneTimes(trace, cluster, planner);
  std::vector<ShareDevice> devices;
  for (const Node& n : cluster.snapshot.nodes) {
    for (const Device& d : n.devices) {
      devices.push_back({DeviceId{n.name, d.index}.ToString(), n.name + "/" + d.type});
    }
  }
  ShareHooks hooks;
  hooks.rate = [&](const AllocJob& job, const DeviceSet& on) {
    return planner->Rate(trace.jobs[static_cast<size_t>(job.id - 1)], job.max_devices, on);
  };
  const UserPolicies policies;  // every user weight 1, no limits

  std::map<size_t, Live> live;  // waiting and running jobs by trace index
  size_t next_arrival = 0;
  const double start = trace.jobs.front().submit_s;
  double now = start;
  double last_end = start;
  while (true) {
    // (2) Ended jobs free their devices; new jobs join.
    for (auto it = live.begin(); it != live.end();) {
      if (it->second.running && it->second.work_left <= 1e-3) {
        run.jobs[it->first].end_s = now;
        last_end = std::max(last_end, now);
        it = live.erase(it);
      } else {
        ++it;
      }
    }
    while (next_arrival < trace.jobs.size() && trace.jobs[next_arrival].submit_s <= now + 1e-9) {
      if (run.jobs[next_arrival].alone_s > 0) {
        const TraceJob& j = trace.jobs[next_arrival];
        live[next_arrival].work_left =
            static_cast<double>(j.steps) * static_cast<double>(j.global_batch);
      }
      ++next_arrival;
    }
    // One allocation.
    size_t held = 0;
    bool waiting = false;
    for (const auto& [i, l] : live) {
      held += l.devices.size();
      waiting = waiting || !l.running;
    }
    if (!live.empty() && !waiting && held < devices.size() && options.grow_min_speedup > 0) {
      GrowOntoFreeDevices(now, trace, devices, options, planner, live, run);
    } else if (!live.empty() && (waiting || held < devices.size())) {
      std::vector<AllocJob> jobs;
      for (const auto& [i, l] : live) {
        const TraceJob& t = trace.jobs[i];
        AllocJob a;
        a.id = static_cast<int64_t>(i) + 1;
        a.user = t.user;
        a.priority = t.priority;
        a.min_devices = t.min_devices;
        a.max_devices = t.max_devices;
        if (l.running) {
          a.held = l.devices;
          a.movable = now - l.moved_at >= options.min_dwell_s - 1e-9;
          a.remaining_s = std::max(0.0, l.paused_until - now) + l.work_left / l.rate;
          a.move_cost_s = options.move_cost_s;
          a.move_keeps_a_device = !options.restart_moves;
        } else {
          a.work = l.work_left;
          a.waited_s = now - t.submit_s;
        }
        jobs.push_back(std::move(a));
      }
      ++run.rounds;
      Result<Allocation> allocation = Allocate(jobs, devices, policies, hooks, options.share);
      if (!allocation.ok()) {
        std::cerr << "allocation: " << allocation.status().ToString() << "\n";
        std::exit(1);
      }
      // (3) Take effect.
      for (const AllocDecision& d : allocation->jobs) {
        const size_t i = static_cast<size_t>(d.id - 1);
        Live& l = live.at(i);
        switch (d.action) {
          case AllocAction::kKeep:
          case AllocAction::kWait:
            break;
          case AllocAction::kStart:
            l.running = true;
            l.devices = d.devices;
            l.rate = d.rate;
            l.paused_until = now;
            l.moved_at = now;
            run.jobs[i].start_s = now;
            run.jobs[i].plan = DevicesText(d.devices);
            break;
          case AllocAction::kGrow:
          case AllocAction::kShrink:
          case AllocAction::kMove:
            ApplyMove(now, options, std::string(AllocActionName(d.action)).c_str(), d.devices,
                      d.rate, l, run.jobs[i], run);
            break;
        }
      }
    }
    // The next event: an arrival, a completion, or a dwell ending while
    // something waits or a device is free.
    double next = std::numeric_limits<double>::infinity();
    if (next_arrival < trace.jobs.size()) next = trace.jobs[next_arrival].submit_s;
    held = 0;
    waiting = false;
    for (const auto& [i, l] : live) {
      held += l.devices.size();
      waiting = waiting || !l.running;
    }
    for (const auto& [i, l] : live) {
      if (!l.running) continue;
      next = std::min(next, std::max(now, l.paused_until) + l.work_left / l.rate);
      const double dwell_ends = l.moved_at + options.min_dwell_s;
      if ((waiting || held < devices.size()) && dwell_ends > now + 1e-9) {
        next = std::min(next, dwell_ends);
      }
    }
    if (std::isinf(next)) break;
    if (waiting) {
      run.time_waiting += next - now;
      run.busy_while_waiting += (next - now) * static_cast<double>(held);
    }
    for (auto& [i, l] : live) {
      if (!l.running) continue;
      const double ran = std::max(0.0, next - std::max(now, l.paused_until));
      l.work_left = std::max(0.0, l.work_left - ran * l.rate);
    }
    now = next;
  }
  for (const auto& [i, l] : live) run.jobs[i].why_not = "never started (waits on an idle cluster)";
  run.makespan_s = last_end - start;
  return run;
}

}  // namespace tessera::scheduler::sim
