#include "agent/agent.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <set>
#include <thread>

#include "agent/reconciler.h"
#include "launch/worker_env.h"

namespace tessera::agent {
namespace {

// The part of a heartbeat that describes the node (devices with their busy
// flags, links, cores, network link), to tell whether it changed.
std::string InventoryText(const api::HeartbeatRequest& r) {
  api::Json devices = api::Json::array();
  for (const api::Device& d : r.devices) devices.push_back(api::ToJson(d));
  api::Json links = api::Json::array();
  for (const api::DeviceLink& l : r.links) links.push_back(api::ToJson(l));
  return api::Json{{"devices", std::move(devices)},
                   {"links", std::move(links)},
                   {"cpu_cores", r.cpu_cores},
                   {"bandwidth", r.network.bandwidth_bytes_per_s},
                   {"latency", r.network.latency_s},
                   {"gloo_bandwidth", r.gloo_link.bandwidth_bytes_per_s},
                   {"gloo_latency", r.gloo_link.latency_s},
                   {"gloo_cpu", r.gloo_link.cpu_per_hop_s}}
      .dump();
}

constexpr std::chrono::milliseconds kMinInterval{50};
constexpr std::chrono::milliseconds kMaxInterval{60'000};

// Progress lines one beat carries at most (about 250 KiB of JSON), so a
// backlog (a long controller outage) cannot make a beat too large to accept.
constexpr size_t kMaxProgressLinesPerBeat = 1024;

std::string KeyText(const api::WorkerKey& k) {
  return std::to_string(k.job_id) + "/" + std::to_string(k.attempt) + "/rank-" +
         std::to_string(k.rank);
}

// A progress line's step (an integer >= 0), or nullopt.
std::optional<int64_t> ProgressStep(const api::Json& line) {
  auto it = line.find("step");
  if (it == line.end() || !it->is_number_integer()) return std::nullopt;
  const int64_t step = it->get<int64_t>();
  if (step < 0) return std::nullopt;
  return step;
}

// Keeps of each worker's progress lines those after the step already
// delivered (lines without a step go), and at most kMaxProgressLinesPerBeat
// in all: the newest of each worker, the same number for each where they
// must be cut.
void TrimProgressLines(const std::map<api::WorkerKey, int64_t>& delivered,
                       std::vector<api::WorkerStatus>* workers) {
  size_t total = 0;
  for (auto& w : *workers) {
    auto it = delivered.find(w.key);
    const int64_t after = it == delivered.end() ? -1 : it->second;
    std::erase_if(w.progress_lines, [after](const api::Json& line) {
      std::optional<int64_t> step = ProgressStep(line);
      return !step || *step <= after;
    });
    total += w.progress_lines.size();
  }
  if (total <= kMaxProgressLinesPerBeat) return;
  size_t each = kMaxProgressLinesPerBeat;  // the largest share that fits
  auto sum = [&](size_t cap) {
    size_t n = 0;
    for (const auto& w : *workers) n += std::min(cap, w.progress_lines.size());
    return n;
  };
  while (each > 0 && sum(each) > kMaxProgressLinesPerBeat) each = each * 3 / 4;
  for (auto& w : *workers) {
    if (w.progress_lines.size() > each) {
      w.progress_lines.erase(w.progress_lines.begin(),
                             w.progress_lines.end() - static_cast<std::ptrdiff_t>(each));
    }
  }
}

}  // namespace

Agent::Agent(AgentOptions options, AgentTransport* transport, InventoryProvider* inventory,
             Supervisor* supervisor, ServiceNotifier* notifier, Clock* clock)
    : options_(std::move(options)),
      transport_(transport),
      inventory_provider_(inventory),
      supervisor_(supervisor),
      notifier_(notifier),
      clock_(clock),
      started_ms_(clock->NowUnixMillis()),
      interval_(options_.heartbeat_interval) {}

Status Agent::Init() {
  TESSERA_ASSIGN_OR_RETURN(inventory_, inventory_provider_->Load());
  for (const auto& d : inventory_.devices) {
    spdlog::info("device {}: {} ({}{}), {} MiB, {:.3f} TFLOPS, {:.1f} GB/s, speed {}", d.index,
                 d.name, d.type, d.emulated ? ", emulated" : "", d.memory_bytes >> 20,
                 d.measured_tflops, d.mem_bandwidth_gbps, d.relative_speed);
  }
  for (const auto& l : inventory_.links) {
    spdlog::info("link {}-{}: {} ({} NVLinks, topology {})", l.a, l.b, LinkKindName(l.kind),
                 l.nvlink_count, l.topology);
  }
  if (inventory_.network) {
    spdlog::info("network link: {:.1f} Mbit/s, {:.3f} ms latency (declared)",
                 inventory_.network->bandwidth_bytes_per_s * 8 / 1e6,
                 inventory_.network->latency_s * 1e3);
  }
  if (inventory_.gloo_link) {
    spdlog::info(
        "loopback Gloo link: {:.3f} ms latency, {:.2f} GB/s, {:.3f} ms of CPU a hop (measured)",
        inventory_.gloo_link->latency_s * 1e3, inventory_.gloo_link->bandwidth_bytes_per_s / 1e9,
        inventory_.gloo_link->cpu_per_hop_s * 1e3);
  }
  return Status::Ok();
}

void Agent::Reload() {
  auto loaded = inventory_provider_->Load();
  if (!loaded.ok()) {
    spdlog::error("inventory reload failed, keeping the previous inventory: {}",
                  loaded.status().ToString());
    return;
  }
  inventory_ = *std::move(loaded);
  spdlog::info("inventory reloaded: {} devices", inventory_.devices.size());
}

Status Agent::Beat() {
  inventory_provider_->Refresh(&inventory_);
  std::vector<api::WorkerStatus> actual = supervisor_->Snapshot();

  api::HeartbeatRequest request;
  request.node = options_.node;
  request.address = options_.address;
  request.agent_started_ms = started_ms_;
  std::set<int64_t> busy;
  for (const auto& w : actual) {
    if (w.state == api::WorkerState::kExited) continue;
    auto it = devices_of_.find(w.key);
    if (it != devices_of_.end()) busy.insert(it->second.begin(), it->second.end());
  }
  request.devices = inventory_.devices;
  for (const DeviceLink& l : inventory_.links) request.links.push_back(ToProtocol(l));
  request.cpu_cores = static_cast<int64_t>(std::thread::hardware_concurrency());
  if (const auto& n = inventory_.network) {
    request.network = {n->bandwidth_bytes_per_s, n->latency_s, 0};
  }
  if (inventory_.gloo_link) request.gloo_link = *inventory_.gloo_link;
  for (auto& d : request.devices) {
    d.node = options_.node;
    d.busy = busy.count(d.index) > 0;
  }
  // Device rows travel only when they changed (to a controller that keeps
  // them between beats).
  const std::string inventory = InventoryText(request);
  if (controller_keeps_inventory_ && inventory == sent_inventory_) {
    request.inventory_unchanged = true;
    request.devices.clear();
    request.links.clear();
    request.cpu_cores = 0;
    request.network = {};
    request.gloo_link = {};
  }
  request.workers = actual;
  TrimProgressLines(delivered_step_, &request.workers);
  request.wait_ms = next_wait_ms_;
  std::map<api::WorkerKey, api::WorkerState> states;
  for (const auto& w : actual) states[w.key] = w.state;
  const bool news = states != reported_;

  const auto sent = clock_->SteadyNow();
  auto answer = transport_->Heartbeat(api::ToJson(request));
  const auto took = clock_->SteadyNow() - sent;
  Status lost;
  if (!answer.ok()) {
    lost = answer.status();
  } else {
    auto parsed = api::HeartbeatResponseFromJson(*answer);
    if (!parsed.ok()) {
      lost = parsed.status().WithPrefix("controller answer");
    } else {
      const api::HeartbeatResponse& response = *parsed;
      controller_keeps_inventory_ = response.accepts_unchanged_inventory;
      if (!request.inventory_unchanged) sent_inventory_ = inventory;
      if (response.send_inventory) sent_inventory_.clear();
      if (response.heartbeat_interval_ms > 0) {
        interval_ = std::clamp(std::chrono::milliseconds(response.heartbeat_interval_ms),
                               kMinInterval, kMaxInterval);
      }
      ReconcileActions actions = Reconcile(response.desired, actual);
      const bool acted = !actions.stop.empty() || !actions.start.empty() || !actions.forget.empty();
      reported_ = std::move(states);
      // Report what changed at once; otherwise long-poll for new work. A
      // controller that answered a poll at once without news for us (it does
      // not hold answers) is asked again only after an interval.
      const bool held =
          request.wait_ms > 0 && took >= std::chrono::milliseconds(request.wait_ms / 2);
      beat_again_now_ = acted || news || held || request.wait_ms == 0;
      const bool busy = std::any_of(actual.begin(), actual.end(), [](const api::WorkerStatus& w) {
        return w.state == api::WorkerState::kRunning;
      });
      const int64_t hold = busy ? options_.busy_hold.count() : 3000;
      next_wait_ms_ = (acted || news) ? 0 : std::min<int64_t>(interval_.count(), hold);
      for (const auto& key : actions.stop) {
        spdlog::info("stopping worker {} (no longer desired)", KeyText(key));
        supervisor_->Stop(key);
      }
      for (const auto& key : actions.forget) {
        supervisor_->Forget(key);
        devices_of_.erase(key);
        reform_handed_.erase(key);
      }
      for (const auto& launch : actions.start) {
        devices_of_[launch.key] = launch.device_indices;
        auto env = launch::DeviceEnvFor(launch, response.desired, inventory_.devices,
                                        static_cast<int64_t>(std::thread::hardware_concurrency()));
        if (!env.ok()) {
          spdlog::error("refusing worker {}: {}", KeyText(launch.key), env.status().ToString());
          supervisor_->Reject(launch, env.status());
          continue;
        }
        Status started = supervisor_->Start(launch, *env);
        if (started.ok()) {
          spdlog::info("started worker {}", KeyText(launch.key));
        } else {
          spdlog::error("worker {} not started: {}", KeyText(launch.key), started.ToString());
        }
      }
      // Running workers of a re-formed attempt learn their new place. A new
      // order is news the agent acted on: the next beat goes at once (its
      // held answer came early, and the re-formed ranks report soon).
      for (const auto& launch : response.desired) {
        if (launch.reform.is_null()) continue;
        const int64_t generation = launch.reform.value("generation", int64_t{0});
        int64_t& handed_generation = reform_handed_[launch.key];
        if (generation > handed_generation) {
          handed_generation = generation;
          beat_again_now_ = true;
        }
        if (Status handed = supervisor_->Reform(launch); !handed.ok()) {
          spdlog::error("worker {}: cannot hand over its re-formed place: {}", KeyText(launch.key),
                        handed.ToString());
        }
      }
      // Remember device use of desired launches only (also after a restart).
      for (const auto& launch : response.desired) devices_of_[launch.key] = launch.device_indices;
    }
  }
  if (!lost.ok()) {
    beat_again_now_ = false;  // retry after an interval
    next_wait_ms_ = 0;
    ++failed_beats_in_row_;
    // Log the first failure and then every 30th, not every beat.
    if (failed_beats_in_row_ == 1 || failed_beats_in_row_ % 30 == 0) {
      spdlog::warn("heartbeat failed ({} in a row), keeping current workers: {}",
                   failed_beats_in_row_, lost.ToString());
    }
    if (notifier_) notifier_->SetStatus("controller unreachable: " + lost.message());
    return lost;
  }
  if (failed_beats_in_row_ > 0) {
    spdlog::info("heartbeat succeeded again after {} failures", failed_beats_in_row_);
  }
  failed_beats_in_row_ = 0;
  // The lines this beat carried arrived; workers no longer reported are gone.
  std::map<api::WorkerKey, int64_t> delivered;
  for (const auto& w : request.workers) {
    auto it = delivered_step_.find(w.key);
    int64_t step = it == delivered_step_.end() ? -1 : it->second;
    for (const auto& line : w.progress_lines)
      step = std::max(step, ProgressStep(line).value_or(-1));
    delivered[w.key] = step;
  }
  delivered_step_ = std::move(delivered);
  if (successful_beats_++ == 0 && notifier_) notifier_->Ready();
  if (notifier_) {
    notifier_->SetStatus("connected; " + std::to_string(actual.size()) + " workers known");
  }
  return Status::Ok();
}

void Agent::RequestStop() {
  {
    MutexLock lock(mu_);
    stop_requested_ = true;
  }
  cv_.notify_all();
}

void Agent::RequestReload() {
  {
    MutexLock lock(mu_);
    reload_requested_ = true;
  }
  cv_.notify_all();
}

void Agent::Run() {
  using steady = std::chrono::steady_clock;
  auto next_beat = steady::now();
  auto next_ping = steady::now();
  const bool watchdog = options_.watchdog_interval.count() > 0;
  while (true) {
    bool reload = false;
    {
      MutexLock lock(mu_);
      if (stop_requested_) break;
      reload = std::exchange(reload_requested_, false);
    }
    if (reload) Reload();
    auto now = steady::now();
    if (now >= next_beat) {
      Beat().IgnoreError();  // logged inside; the next beat retries
      next_beat = beat_again_now_ ? steady::now() : steady::now() + interval_;
    }
    if (watchdog && steady::now() >= next_ping) {
      if (notifier_) notifier_->Watchdog();
      next_ping = steady::now() + options_.watchdog_interval;
    }
    auto wake = watchdog ? std::min(next_beat, next_ping) : next_beat;
    MutexLock lock(mu_);
    while (!stop_requested_ && !reload_requested_) {
      if (cv_.wait_until(mu_, wake) == std::cv_status::timeout) break;
    }
  }
  if (notifier_) notifier_->Stopping();
  if (options_.stop_workers_on_exit) {
    spdlog::info("stopping all workers before exit");
    if (!supervisor_->StopAllAndWait()) spdlog::warn("some workers did not stop in time");
  } else {
    spdlog::info("leaving workers running for the next agent to re-adopt");
  }
}

}  // namespace tessera::agent
