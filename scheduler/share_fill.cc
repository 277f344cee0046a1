// Step 4 of the share policy (share_policy.h): the devices left free after
// the minimums, and exchanges that change no job's device count.
//   1. Fill: one device at a time to the job whose normalized throughput it
//      raises most (users below their weighted share first; behind a
//      reservation only its spare devices, or to jobs that end before it);
//   2. Regroup: each job planned on its devices and the free ones, taking
//      that plan's when it gains;
//   3. Trade: two jobs swap devices of two groups when that raises their
//      normalized sum (comparative advantage, as Gavel's);
//   4. CatchUp: a job far behind its fair share (FinishFairness) swaps a
//      slower device for a faster one with a job that stays within it.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "scheduler/share_allocator.h"

namespace tessera::scheduler::share_internal {

Status Allocator::Fill(const std::set<int64_t>& fixed, Assignment* a, DeviceSet* free,
                       std::map<std::string, UserUsage>* usage,
                       std::optional<Reservation>* reserved) {
  double total_weight = 0;
  std::set<std::string> users;
  for (const AllocJob& j : jobs_) users.insert(j.user);
  for (const std::string& u : users) total_weight += policies_.For(u).weight;
  const double even = static_cast<double>(devices_.size()) / total_weight;
  while (!free->empty()) {
    // The first free device of each group.
    std::map<std::string, std::string> first_free;
    for (const std::string& d : *free) first_free.emplace(group_of_.at(d), d);
    struct Best {
      int64_t job = 0;
      std::string device;
      double gain = 0;
    };
    std::optional<Best> best_under, best_any;
    for (auto& [id, given] : a->given) {
      const AllocJob& j = *by_id_.at(id);
      if (fixed.contains(id)) continue;
      if (j.max_devices > 0 && static_cast<int64_t>(given.size()) >= j.max_devices) continue;
      const UserPolicy& policy = policies_.For(j.user);
      const UserUsage& used = (*usage)[j.user];
      if (policy.max_devices > 0 && used.devices >= policy.max_devices) continue;
      // Behind a reservation only a spare device, or one to a job that ends
      // before the reserved start anyway.
      if (*reserved && (*reserved)->spare <= 0) {
        TESSERA_ASSIGN_OR_RETURN(double ends, EndsIn(j, given));
        if (!(ends <= (*reserved)->shadow_s)) continue;
      }
      TESSERA_ASSIGN_OR_RETURN(double now, RateOf(j, given));
      const bool under = static_cast<double>(used.devices) / policy.weight < even;
      for (const auto& [group, device] : first_free) {
        // Its own device of the group, when one is free.
        std::string pick = device;
        for (const std::string& h : j.held) {
          if (free->contains(h) && group_of_.at(h) == group) {
            pick = h;
            break;
          }
        }
        DeviceSet more = given;
        more.insert(pick);
        TESSERA_ASSIGN_OR_RETURN(double rate, RateOf(j, more));
        double gain = (rate - now) / fair_rate_.at(id);
        if (j.held.contains(pick)) gain *= options_.keep_bonus;
        if (!(gain >= options_.min_gain)) continue;
        std::optional<Best>& slot = under ? best_under : best_any;
        if (!slot || gain > slot->gain) slot = Best{id, pick, gain};
        if (under && (!best_any || gain > best_any->gain)) best_any = Best{id, pick, gain};
      }
    }
    const std::optional<Best>& chosen = best_under ? best_under : best_any;
    if (!chosen) break;
    a->given[chosen->job].insert(chosen->device);
    free->erase(chosen->device);
    (*usage)[by_id_.at(chosen->job)->user].devices += 1;
    if (*reserved && (*reserved)->spare > 0) --(*reserved)->spare;
  }
  return Status::Ok();
}

Status Allocator::Regroup(const std::set<int64_t>& fixed, Assignment* a, DeviceSet* free,
                          std::map<std::string, UserUsage>* usage,
                          std::optional<Reservation>* reserved) {
  // The fill adds one device at a time, so it can stop on a set no single
  // device improves while a different set would: four fast devices where
  // eight of another type run the job faster. Each job is planned once on
  // what it was given and the devices left free, and takes that plan's
  // devices when they raise its normalized throughput by min_gain for each
  // device they add (and stay within its user's device limit); what it gives
  // up is free again.
  if (free->empty()) return Status::Ok();
  for (auto& [id, given] : a->given) {
    if (fixed.contains(id)) continue;
    const AllocJob& j = *by_id_.at(id);
    DeviceSet pool = given;
    pool.insert(free->begin(), free->end());
    TESSERA_ASSIGN_OR_RETURN(RateOnDevices wider, Rate(j, pool));
    TESSERA_ASSIGN_OR_RETURN(double now, RateOf(j, given));
    // min_gain for each device it adds, as the fill asks of one.
    const auto added = std::max<int64_t>(
        1, static_cast<int64_t>(wider.used.size()) - static_cast<int64_t>(given.size()));
    if (wider.used.empty() || !((wider.rate - now) / fair_rate_.at(id) >=
                                options_.min_gain * static_cast<double>(added))) {
      continue;
    }
    const UserPolicy& policy = policies_.For(j.user);
    UserUsage& used = (*usage)[j.user];
    const int64_t after =
        used.devices - static_cast<int64_t>(given.size()) + static_cast<int64_t>(wider.used.size());
    if (policy.max_devices > 0 && after > policy.max_devices) continue;
    // Behind a reservation: at most the spare devices more.
    const int64_t more =
        static_cast<int64_t>(wider.used.size()) - static_cast<int64_t>(given.size());
    if (*reserved && more > 0) {
      TESSERA_ASSIGN_OR_RETURN(double ends, EndsIn(j, given));
      if (!(ends <= (*reserved)->shadow_s)) {
        if (more > (*reserved)->spare) continue;
        (*reserved)->spare -= more;
      }
    }
    used.devices = after;
    free->insert(given.begin(), given.end());
    for (const std::string& d : wider.used) free->erase(d);
    given = wider.used;
    if (free->empty()) break;
  }
  return Status::Ok();
}

Status Allocator::Trade(const std::set<int64_t>& fixed, Assignment* a) {
  // Two jobs swap one device of one group for one of another when that raises
  // the sum of their normalized throughputs: each type goes to the job it
  // helps most relative to its others. Device counts do not change.
  auto firsts = [&](const DeviceSet& set) {
    std::map<std::string, std::string> out;
    for (const std::string& d : set) out.emplace(group_of_.at(d), d);
    return out;
  };
  for (int pass = 0; pass < 3; ++pass) {
    bool traded = false;
    for (auto i = a->given.begin(); i != a->given.end(); ++i) {
      if (fixed.contains(i->first)) continue;
      for (auto k = std::next(i); k != a->given.end(); ++k) {
        if (fixed.contains(k->first)) continue;
        const AllocJob& ji = *by_id_.at(i->first);
        const AllocJob& jk = *by_id_.at(k->first);
        const std::map<std::string, std::string> gi = firsts(i->second), gk = firsts(k->second);
        if (gi.size() + gk.size() < 3 && gi.begin()->first == gk.begin()->first) continue;
        TESSERA_ASSIGN_OR_RETURN(double ri, RateOf(ji, i->second));
        TESSERA_ASSIGN_OR_RETURN(double rk, RateOf(jk, k->second));
        double best = options_.min_gain;
        std::optional<std::pair<std::string, std::string>> swap;
        for (const auto& [group_i, di] : gi) {
          for (const auto& [group_k, dk] : gk) {
            if (group_i == group_k) continue;
            DeviceSet si = i->second, sk = k->second;
            si.erase(di);
            si.insert(dk);
            sk.erase(dk);
            sk.insert(di);
            TESSERA_ASSIGN_OR_RETURN(double ri2, RateOf(ji, si));
            TESSERA_ASSIGN_OR_RETURN(double rk2, RateOf(jk, sk));
            // A swap never leaves a job with no plan on what it holds.
            if (!(ri2 > 0) || !(rk2 > 0)) continue;
            const double delta =
                (ri2 - ri) / fair_rate_.at(ji.id) + (rk2 - rk) / fair_rate_.at(jk.id);
            if (delta > best) {
              best = delta;
              swap = std::make_pair(di, dk);
            }
          }
        }
        if (!swap) continue;
        i->second.erase(swap->first);
        i->second.insert(swap->second);
        k->second.erase(swap->second);
        k->second.insert(swap->first);
        traded = true;
      }
    }
    if (!traded) break;
  }
  return Status::Ok();
}

Result<std::optional<double>> Allocator::FinishFairness(const AllocJob& job,
                                                        const DeviceSet& devices) {
  const double fair = fair_rate_.at(job.id);
  TESSERA_ASSIGN_OR_RETURN(double rate, RateOf(job, devices));
  if (!(rate > 0) || !(fair > 0)) return std::optional<double>();
  if (job.held.empty()) {
    if (!(job.work > 0)) return std::optional<double>();
    return std::optional<double>((job.waited_s + job.work / rate) / (job.work / fair));
  }
  if (!(job.age_s > 0) || !(job.remaining_s > 0)) return std::optional<double>();
  TESSERA_ASSIGN_OR_RETURN(double now, RateOf(job, job.held));
  if (!(now > 0)) return std::optional<double>();
  const double left = job.remaining_s * now;
  double finish = left / rate;
  if (devices != job.held) finish += MoveSeconds(job, devices);
  return std::optional<double>((job.age_s + finish) / ((job.work_done + left) / fair));
}

Status Allocator::CatchUp(const std::set<int64_t>& fixed, Assignment* a) {
  // A job that restarts from a checkpoint and has fallen behind its fair
  // share where it is (its projected finish-time fairness above
  // options.catch_up_above: a job on the lab's slowest devices for its whole
  // run) swaps a device of a slower group for one of a faster group with a
  // job starting now or another such job, when that lowers its own by the
  // fraction options.catch_up_gain and leaves the other within the bound (or
  // no worse off than it is): the slow devices go round instead of staying
  // with whoever started on them. The worst off first; each job swaps once a
  // round. Device counts do not change, so neither do shares.
  if (!(options_.catch_up_above > 0)) return Status::Ok();
  auto may_swap = [&](const AllocJob& j) {
    return !fixed.contains(j.id) && (j.held.empty() || j.requeueable);
  };
  std::vector<std::pair<double, int64_t>> behind;  // (-fairness, id): the worst off first
  for (const auto& [id, given] : a->given) {
    const AllocJob& j = *by_id_.at(id);
    if (j.held.empty() || !may_swap(j)) continue;
    TESSERA_ASSIGN_OR_RETURN(std::optional<double> rho, FinishFairness(j, given));
    if (rho && *rho > options_.catch_up_above) behind.emplace_back(-*rho, id);
  }
  std::sort(behind.begin(), behind.end());
  std::set<int64_t> swapped;
  for (const auto& [neg_rho, x] : behind) {
    if (swapped.contains(x)) continue;
    const AllocJob& jx = *by_id_.at(x);
    const double rho_x = -neg_rho;
    DeviceSet& gx = a->given.at(x);
    TESSERA_ASSIGN_OR_RETURN(double rx, RateOf(jx, gx));
    double best = std::numeric_limits<double>::infinity();
    std::optional<std::tuple<int64_t, std::string, std::string>> swap;
    for (auto& [y, gy] : a->given) {
      const AllocJob& jy = *by_id_.at(y);
      if (y == x || swapped.contains(y) || !may_swap(jy)) continue;
      TESSERA_ASSIGN_OR_RETURN(std::optional<double> rho_y, FinishFairness(jy, gy));
      if (!rho_y) continue;
      for (const std::string& dx : gx) {
        for (const std::string& dy : gy) {
          if (group_of_.at(dx) == group_of_.at(dy)) continue;
          DeviceSet sx = gx, sy = gy;
          sx.erase(dx);
          sx.insert(dy);
          sy.erase(dy);
          sy.insert(dx);
          TESSERA_ASSIGN_OR_RETURN(double rx2, RateOf(jx, sx));
          if (!(rx2 > rx)) continue;
          TESSERA_ASSIGN_OR_RETURN(std::optional<double> rho_x2, FinishFairness(jx, sx));
          TESSERA_ASSIGN_OR_RETURN(std::optional<double> rho_y2, FinishFairness(jy, sy));
          if (!rho_x2 || !rho_y2 || *rho_x2 > rho_x * (1.0 - options_.catch_up_gain) ||
              *rho_y2 > std::max(*rho_y, options_.catch_up_above)) {
            continue;
          }
          if (const double worst = std::max(*rho_x2, *rho_y2); worst < best) {
            best = worst;
            swap = std::make_tuple(y, dx, dy);
          }
        }
      }
    }
    if (!swap) continue;
    const auto& [y, dx, dy] = *swap;
    DeviceSet& gy = a->given.at(y);
    gx.erase(dx);
    gx.insert(dy);
    gy.erase(dy);
    gy.insert(dx);
    swapped.insert({x, y});
    a->behind.insert(x);
    a->caught_up[x] = "where it is it would finish " + Fixed(rho_x, 1) +
                      "x its time alone on its fair share; it swaps " + dx + " for " + dy + " (" +
                      Fixed(best, 1) + "x at worst for the two)";
    if (!by_id_.at(y)->held.empty()) {
      a->caught_up[y] = "job " + std::to_string(x) + " of " + jx.user + " would finish " +
                        Fixed(rho_x, 1) +
                        "x its time alone on its fair share where it is; it swaps " + dy + " for " +
                        dx + " (" + Fixed(best, 1) + "x at worst for the two)";
    }
  }
  return Status::Ok();
}

}  // namespace tessera::scheduler::share_internal
