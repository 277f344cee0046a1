// Rigid jobs through the queue pass (run.h), as tesserad runs them today.
//
// Steps: at each arrival or completion, ended jobs free their devices, new
// jobs join the queue, and one queue pass places what it can (as the
// controller's Tick does; between events nothing changes, so more passes
// would decide the same). A job runs steps x the predicted step time of the
// plan it started with.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <map>
#include <set>

#include "bench/sched/run.h"
#include "scheduler/queue_pass.h"

namespace tessera::scheduler::sim {

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

void CheckLimits(const UserPolicies& users, const std::map<std::string, UserUsage>& held,
                 double now_s, Run* run) {
  for (const auto& [user, h] : held) {
    const UserPolicy& p = users.For(user);
    std::string broken;
    if (p.max_devices > 0 && h.devices > p.max_devices) {
      broken = user + " holds " + std::to_string(h.devices) + " devices, " +
               std::to_string(p.max_devices) + " allowed";
    } else if (p.max_running_jobs > 0 && h.running_jobs > p.max_running_jobs) {
      broken = user + " runs " + std::to_string(h.running_jobs) + " jobs, " +
               std::to_string(p.max_running_jobs) + " allowed";
    }
    if (broken.empty()) continue;
    if (run->limit_breaks++ == 0) {
      char at[32];
      std::snprintf(at, sizeof at, "at %.2f h ", now_s / 3600);
      run->first_limit_break = at + broken;
    }
  }
}

std::string RefusedAtSubmission(const UserPolicies& users, const std::string& user,
                                int64_t waiting) {
  const int64_t limit = users.For(user).max_pending_jobs;
  if (limit <= 0 || waiting < limit) return "";
  return "refused at submission: " + user + " had " + std::to_string(waiting) +
         " jobs waiting, the most allowed (max_pending_jobs)";
}

std::vector<JobOutcome> AloneTimes(const Trace& trace, const Cluster& cluster,
                                   SimPlanner* planner) {
  std::vector<std::string> devices;
  for (const Node& n : cluster.snapshot.nodes) {
    for (const Device& d : n.devices) devices.push_back(DeviceId{n.name, d.index}.ToString());
  }
  // Users' weighted shares of the devices (the users of the trace).
  std::set<std::string> users;
  for (const TraceJob& j : trace.jobs) users.insert(j.user);
  double total_weight = 0;
  for (const std::string& u : users) total_weight += cluster.users.For(u).weight;
  std::vector<JobOutcome> out(trace.jobs.size());
  for (size_t i = 0; i < trace.jobs.size(); ++i) {
    const TraceJob& j = trace.jobs[i];
    Result<PlanSet> alone = planner->Plan(j, j.max_devices, {});
    if (alone.ok() && !alone->plans.empty()) {
      out[i].alone_s = static_cast<double>(j.steps) * alone->plans.front().predicted.step_s;
      // Its fair share: at least one device and min_devices, at most max_devices
      // and its user's device limit.
      const double share =
          static_cast<double>(devices.size()) * cluster.users.For(j.user).weight / total_weight;
      auto n = static_cast<int64_t>(std::floor(share + 0.5));
      n = std::max({n, int64_t{1}, j.min_devices});
      if (j.max_devices > 0) n = std::min(n, j.max_devices);
      if (const int64_t cap = cluster.users.For(j.user).max_devices; cap > 0) {
        n = std::max(std::min(n, cap), j.min_devices);
      }
      n = std::min<int64_t>(n, static_cast<int64_t>(devices.size()));
      DeviceSet slice;
      for (int64_t k = 0; k < n; ++k) {
        const auto at =
            static_cast<size_t>((static_cast<double>(k) + 0.5) *
                                static_cast<double>(devices.size()) / static_cast<double>(n));
        slice.insert(devices[std::min(at, devices.size() - 1)]);
      }
      Result<RateOnDevices> on_share = planner->Rate(j, j.max_devices, slice);
      const double work = static_cast<double>(j.steps) * static_cast<double>(j.global_batch);
      out[i].share_s = on_share.ok() && on_share->rate > 0 ? work / on_share->rate : out[i].alone_s;
    } else {
      out[i].why_not = "never fits: " + (alone.ok() ? "no plan" : alone.status().message());
    }
  }
  return out;
}

Run SimulateRigid(const Trace& trace, const Cluster& cluster, QueueOrdering ordering,
                  SimPlanner* planner) {
  Run run;
  run.policy = ordering == QueueOrdering::kFifo ? "fifo" : "fair";
  run.devices = cluster.snapshot.DeviceCount();
  // Each job alone on the idle cluster; a job that fits nowhere is never queued.
  run.jobs = AloneTimes(trace, cluster, planner);

  struct Running {
    size_t job;
    double end_s;
    std::vector<std::string> devices;
  };
  std::vector<Running> running;
  std::vector<size_t> waiting;  // trace indices
  std::map<std::string, UserUsage> usage;
  DeviceSet busy;
  const UserPolicies& policies = cluster.users;
  size_t next_arrival = 0;
  const double start = trace.jobs.front().submit_s;
  double now = start;
  double last_end = start;

  QueuePassHooks hooks;
  hooks.plan = [&](const PassJob& job, const DeviceSet& b) {
    return planner->Plan(trace.jobs[static_cast<size_t>(job.id - 1)], job.max_devices, b);
  };
  if (ordering == QueueOrdering::kFairShare) {
    hooks.running = [&]() -> Result<std::vector<RunningHold>> {
      std::vector<RunningHold> out;
      for (const Running& r : running) {
        out.push_back(RunningHold{DeviceSet(r.devices.begin(), r.devices.end()), r.end_s - now});
      }
      return out;
    };
    hooks.run_s = [&](const PassJob& job, const Plan& plan) {
      return static_cast<double>(trace.jobs[static_cast<size_t>(job.id - 1)].steps) *
             plan.predicted.step_s;
    };
  }

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
      const std::string& user = trace.jobs[next_arrival].user;
      const auto waits = std::count_if(waiting.begin(), waiting.end(),
                                       [&](size_t i) { return trace.jobs[i].user == user; });
      std::string refused = RefusedAtSubmission(policies, user, waits);
      if (!refused.empty()) {
        run.jobs[next_arrival].why_not = std::move(refused);
      } else if (run.jobs[next_arrival].alone_s > 0) {
        waiting.push_back(next_arrival);
      }
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
      ++run.rounds;
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
      CheckLimits(policies, usage, now - start, &run);
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

}  // namespace tessera::scheduler::sim
