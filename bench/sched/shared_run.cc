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
//      Inference jobs (independent ranks): under tesserad's rules the
//      allocation only starts and shrinks them (a move that keeps some of
//      their devices shrinks them to those), and while no job waits each
//      grows onto every free device its plan uses (GrowOntoFreeDevices, as
//      JobController::GrowInference).
//   3. Decisions take effect at once, shrinks first: a started job runs from
//      now; a training job shrunk, grown or moved makes no progress for
//      move_cost_s (checkpoint or state transfer, restart), an inference job
//      shrunk or moved for infer_move_cost_s (its dropped ranks' chunks done
//      again; growth costs it nothing), and then runs at its new throughput.
//      A start, growth or move onto a device another job still holds (an
//      inference job the allocation would have moved) waits for a later
//      round, as in tesserad.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "bench/sched/run.h"
#include "scheduler/share_policy.h"

namespace tessera::scheduler::sim {

namespace {

struct Live {
  bool infer = false;
  bool running = false;
  DeviceSet devices;
  double rate = 0;          // samples per second
  double work_left = 0;     // samples
  double paused_until = 0;  // a move's cost ends
  double moved_at = 0;      // last start or move
  double restart_s = 0;     // a requeued job's restart cost, paid when it starts again
  int64_t restarts = 0;     // requeues and moves onto none of its devices
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

// What each user's running jobs hold: jobs and devices.
std::map<std::string, UserUsage> UsageOf(const Trace& trace, const std::map<size_t, Live>& live) {
  std::map<std::string, UserUsage> usage;
  for (const auto& [i, l] : live) {
    if (!l.running) continue;
    usage[trace.jobs[i].user].running_jobs += 1;
    usage[trace.jobs[i].user].devices += static_cast<int64_t>(l.devices.size());
  }
  return usage;
}

// Seconds `l` may not change after its start or last change.
double DwellOf(const Live& l, const SharedOptions& options) {
  return l.infer ? options.infer_settle_s : options.min_dwell_s;
}

// Seconds of progress a shrink or move costs `l` (growth costs an inference
// job nothing: GrowOntoFreeDevices).
double MoveCostOf(const Live& l, const SharedOptions& options) {
  return l.infer ? options.infer_move_cost_s : options.move_cost_s;
}

// Marks `l` moved onto `devices` at `rate` now, its progress paused for
// `cost_s`.
void ApplyMove(double now, double cost_s, const char* action, const DeviceSet& devices, double rate,
               Live& l, JobOutcome& outcome, Run& run) {
  l.devices = devices;
  l.rate = rate;
  l.paused_until = std::max(now, l.paused_until) + cost_s;
  l.moved_at = now;
  outcome.plan += std::string(" -> ") + action + " " + DevicesText(devices);
  ++outcome.moves;
  ++run.moves;
}

// tesserad's growth while no job waits. Training (JobController::
// GrowTraining): each running job that may move, in submission order,
// planned on its own devices and the free ones; it takes that plan's devices
// when they add one, its throughput rises grow_min_speedup times, and the
// time saved over its remaining work exceeds the move's cost. Then inference
// (JobController::GrowInference): each running infer job settled, the user
// holding the fewest devices first, takes the free devices its plan on its
// own and the free ones uses (new ranks join; the others run on).
void GrowOntoFreeDevices(double now, const Trace& trace, const std::vector<ShareDevice>& devices,
                         const UserPolicies& users, const SharedOptions& options,
                         SimPlanner* planner, std::map<size_t, Live>& live, Run& run) {
  DeviceSet free;
  for (const ShareDevice& d : devices) free.insert(d.id);
  std::map<std::string, int64_t> held_by;  // devices by user
  for (const auto& [i, l] : live) {
    for (const std::string& d : l.devices) free.erase(d);
    held_by[trace.jobs[i].user] += static_cast<int64_t>(l.devices.size());
  }
  auto grow = [&](size_t i, Live& l) -> Result<bool> {
    DeviceSet wider = l.devices;
    wider.insert(free.begin(), free.end());
    const TraceJob& t = trace.jobs[i];
    // Its user's device limit bounds what it may grow to.
    const int64_t own = static_cast<int64_t>(l.devices.size());
    const std::optional<int64_t> max_devices =
        GrowthBound(users.For(t.user), held_by[t.user] - own, own, t.max_devices);
    if (!max_devices) return false;
    TESSERA_ASSIGN_OR_RETURN(RateOnDevices grown, planner->Rate(t, *max_devices, wider));
    bool gains = false;
    for (const std::string& d : grown.used) gains = gains || !l.devices.contains(d);
    if (!gains) return false;
    if (l.infer) {
      // New ranks join on the free devices that plan uses; the running ones
      // stay where they are.
      DeviceSet joined = l.devices;
      joined.insert(grown.used.begin(), grown.used.end());
      if (max_devices > 0 && static_cast<int64_t>(joined.size()) > max_devices) return false;
      TESSERA_ASSIGN_OR_RETURN(grown, planner->Rate(t, t.max_devices, joined));
      grown.used = std::move(joined);
    }
    if (!(grown.rate > l.rate)) return false;
    const double saved_s = l.work_left / l.rate - l.work_left / grown.rate;
    if (!l.infer &&
        (grown.rate < l.rate * options.grow_min_speedup || saved_s <= options.move_cost_s)) {
      return false;
    }
    for (const std::string& d : grown.used) free.erase(d);
    for (const std::string& d : l.devices) {
      if (!grown.used.contains(d)) free.insert(d);
    }
    held_by[t.user] += static_cast<int64_t>(grown.used.size()) - own;
    ApplyMove(now, l.infer ? 0 : options.move_cost_s, "grow", grown.used, grown.rate, l,
              run.jobs[i], run);
    return true;
  };
  auto may_grow = [&](const Live& l) {
    return l.running && now - l.moved_at >= DwellOf(l, options) - 1e-9 && l.rate > 0;
  };
  for (auto& [i, l] : live) {
    if (free.empty()) return;
    if (l.infer || !may_grow(l)) continue;
    (void)grow(i, l);
  }
  // Inference: the user holding the fewest devices first, then the fewest
  // ranks, then submission.
  std::vector<std::tuple<int64_t, size_t, size_t>> order;
  for (const auto& [i, l] : live) {
    if (l.infer && l.running) order.emplace_back(held_by[trace.jobs[i].user], l.devices.size(), i);
  }
  std::sort(order.begin(), order.end());
  for (const auto& [user_held, ranks, i] : order) {
    if (free.empty()) return;
    Live& l = live.at(i);
    if (!may_grow(l)) return;  // the devices wait for it (as GrowInference's settling job)
    (void)grow(i, l);
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
  const UserPolicies& policies = cluster.users;

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
      const std::string& user = trace.jobs[next_arrival].user;
      const auto waits = std::count_if(live.begin(), live.end(), [&](const auto& entry) {
        return !entry.second.running && trace.jobs[entry.first].user == user;
      });
      std::string refused = RefusedAtSubmission(policies, user, waits);
      if (!refused.empty()) {
        run.jobs[next_arrival].why_not = std::move(refused);
      } else if (run.jobs[next_arrival].alone_s > 0) {
        const TraceJob& j = trace.jobs[next_arrival];
        Live& l = live[next_arrival];
        l.infer = j.kind == JobKind::kInfer;
        l.work_left = static_cast<double>(j.steps) * static_cast<double>(j.global_batch);
      }
      ++next_arrival;
    }
    // One allocation.
    bool blocked = false;  // a decision not taken this round: another round soon
    size_t held = 0;
    for (const auto& [i, l] : live) held += l.devices.size();
    std::map<std::string, UserUsage> usage = UsageOf(trace, live);
    // A job waits for devices unless its user's limits hold it (tesserad's
    // JobController::PlaceableWaiting): one held cannot take a free device.
    bool waiting = false;
    for (const auto& [i, l] : live) {
      const TraceJob& t = trace.jobs[i];
      waiting = waiting ||
                (!l.running &&
                 LimitHolds(t.user, policies.For(t.user), usage[t.user], t.min_devices).empty());
    }
    if (!live.empty() && !waiting && held < devices.size() && options.grow_min_speedup > 0) {
      GrowOntoFreeDevices(now, trace, devices, policies, options, planner, live, run);
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
          a.movable = now - l.moved_at >= DwellOf(l, options) - 1e-9;
          a.remaining_s = std::max(0.0, l.paused_until - now) + l.work_left / l.rate;
          a.move_cost_s = MoveCostOf(l, options);
          a.move_keeps_a_device = !options.restart_moves;
          a.requeueable = !l.infer && options.restart_moves;
          a.restarts = l.restarts;
          a.age_s = now - t.submit_s;
          a.work_done =
              static_cast<double>(t.steps) * static_cast<double>(t.global_batch) - l.work_left;
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
      // (3) Take effect: shrinks first, then starts, growth and moves onto
      // devices no other job holds.
      const bool tesserad_rules = options.grow_min_speedup > 0;
      for (const AllocDecision& d : allocation->jobs) {
        Live& l = live.at(static_cast<size_t>(d.id - 1));
        if (!l.running || d.action == AllocAction::kStart || d.action == AllocAction::kWait ||
            d.action == AllocAction::kKeep) {
          continue;
        }
        if (d.action == AllocAction::kRequeue) {
          // Back to the queue: it stops, and restarts from its checkpoint
          // when placed again.
          l.running = false;
          l.devices.clear();
          l.restart_s = MoveCostOf(l, options);
          ++l.restarts;
          run.jobs[static_cast<size_t>(d.id - 1)].plan += " -> requeue";
          ++run.jobs[static_cast<size_t>(d.id - 1)].moves;
          ++run.moves;
          continue;
        }
        DeviceSet to = d.devices;
        double rate = d.rate;
        if (l.infer && tesserad_rules && d.action != AllocAction::kShrink) {
          // It grows by GrowOntoFreeDevices; a move shrinks it to the devices
          // it keeps. Where neither applies it stays, settling (the next
          // round plans around it).
          DeviceSet kept;
          std::set_intersection(to.begin(), to.end(), l.devices.begin(), l.devices.end(),
                                std::inserter(kept, kept.end()));
          const TraceJob& t = trace.jobs[static_cast<size_t>(d.id - 1)];
          Result<RateOnDevices> on_kept = RateOnDevices{};
          if (d.action == AllocAction::kMove && !kept.empty()) {
            on_kept = planner->Rate(t, t.max_devices, kept);
          }
          if (!on_kept.ok() || !(on_kept->rate > 0)) {
            l.moved_at = now;
            blocked = true;
            continue;
          }
          to = std::move(kept);
          rate = on_kept->rate;
        } else if (d.action != AllocAction::kShrink) {
          continue;
        }
        ApplyMove(now, MoveCostOf(l, options), "shrink", to, rate, l,
                  run.jobs[static_cast<size_t>(d.id - 1)], run);
      }
      // What each job holds after the round: its decision's devices where
      // that applies, else what it holds now. A decision onto a device
      // another job keeps is not taken (a later round), which may keep that
      // job where it is in turn.
      std::map<size_t, const AllocDecision*> applies;
      for (const AllocDecision& d : allocation->jobs) {
        const Live& l = live.at(static_cast<size_t>(d.id - 1));
        if (d.action == AllocAction::kStart ||
            ((d.action == AllocAction::kGrow || d.action == AllocAction::kMove) &&
             !(l.infer && tesserad_rules))) {
          applies[static_cast<size_t>(d.id - 1)] = &d;
        }
      }
      for (bool clashed = true; clashed;) {
        clashed = false;
        DeviceSet kept;  // by jobs whose decision does not apply
        for (const auto& [i, l] : live) {
          if (!applies.contains(i)) kept.insert(l.devices.begin(), l.devices.end());
        }
        std::erase_if(applies, [&](const auto& entry) {
          const DeviceSet& to = entry.second->devices;
          const bool clash = std::any_of(
              to.begin(), to.end(), [&](const std::string& dev) { return kept.contains(dev); });
          clashed = clashed || clash;
          blocked = blocked || clash;
          return clash;
        });
      }
      for (const auto& [i, d] : applies) {
        Live& l = live.at(i);
        if (d->action == AllocAction::kStart) {
          l.running = true;
          l.devices = d->devices;
          l.rate = d->rate;
          l.paused_until = now + l.restart_s;
          l.moved_at = now;
          if (l.restart_s > 0) {
            run.jobs[i].plan += " -> restart " + DevicesText(d->devices);
          } else {
            run.jobs[i].start_s = now;
            run.jobs[i].plan = DevicesText(d->devices);
          }
          l.restart_s = 0;
          continue;
        }
        if (std::none_of(d->devices.begin(), d->devices.end(),
                         [&](const std::string& dev) { return l.devices.contains(dev); })) {
          ++l.restarts;
        }
        ApplyMove(now, MoveCostOf(l, options), std::string(AllocActionName(d->action)).c_str(),
                  d->devices, d->rate, l, run.jobs[i], run);
      }
    }
    // What each user holds after the round, against its limits.
    CheckLimits(policies, UsageOf(trace, live), now - start, &run);
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
      const double dwell_ends = l.moved_at + DwellOf(l, options);
      if ((waiting || held < devices.size()) && dwell_ends > now + 1e-9) {
        next = std::min(next, dwell_ends);
      }
    }
    if (blocked) next = std::min(next, now + options.infer_settle_s);
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
