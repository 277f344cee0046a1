#include "slurm/slurm_pool.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "common/atomic_file.h"
#include "launch/rank_files.h"
#include "launch/worker_env.h"

namespace tessera::slurm {
namespace {

namespace fs = std::filesystem;

// The exit code a rank's launcher recorded, if it did.
std::optional<int64_t> ReadExit(FileSystem& files, const fs::path& path) {
  Result<std::string> text = files.ReadFile(path);
  if (!text.ok()) return std::nullopt;
  api::Json j = api::Json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("exit_code") || !j["exit_code"].is_number_integer()) {
    return std::nullopt;  // being written
  }
  return j["exit_code"].get<int64_t>();
}

constexpr int64_t kKilledExitCode = 137;  // 128 + SIGKILL: the node or Slurm ended it

}  // namespace

bool SlurmPool::SlurmState::terminal() const {
  for (const std::string& s : states) {
    if (!IsTerminalJobState(s)) return false;
  }
  return !states.empty();
}

bool SlurmPool::SlurmState::all_completed() const {
  for (const std::string& s : states) {
    if (s != "COMPLETED") return false;
  }
  return !states.empty();
}

SlurmPool::SlurmPool(SlurmClient* client, HeartbeatFn heartbeat, const Clock* clock,
                     SlurmPoolOptions options)
    : client_(client),
      heartbeat_(std::move(heartbeat)),
      clock_(clock),
      options_(std::move(options)) {}

SlurmPool::~SlurmPool() { Stop(); }

std::optional<bool> SlurmPool::NodeUp(const std::string& node) const {
  std::lock_guard lock(mu_);
  if (!last_ok_ || clock_->SteadyNow() - *last_ok_ > options_.stale_after) return std::nullopt;
  auto it = up_.find(node);
  if (it == up_.end()) return std::nullopt;
  return it->second;
}

bool SlurmPool::Owns(const std::string& node) const {
  std::lock_guard lock(mu_);
  return up_.contains(node);
}

const SlurmAttempt* SlurmPool::AttemptFor(const AttemptKey& key) {
  if (auto it = attempts_.find(key); it != attempts_.end()) return &it->second;
  const fs::path file = AttemptDir(options_.rank_root, key.first, key.second) / "attempt.json";
  Result<std::string> text = options_.fs->ReadFile(file);
  if (!text.ok()) return nullptr;
  api::Json j = api::Json::parse(*text, nullptr, false);
  auto attempt = SlurmAttemptFromJson(j);
  if (!attempt.ok()) return nullptr;
  return &attempts_.emplace(key, *std::move(attempt)).first->second;
}

std::vector<api::WorkerStatus> SlurmPool::StatusesOn(
    const std::string& node, const std::map<AttemptKey, SlurmState>& slurm) {
  std::vector<api::WorkerStatus> out;
  for (const auto& [key, attempt] : attempts_) {
    auto s = slurm.find(key);
    const bool ended = s != slurm.end() && s->second.terminal();
    for (size_t r = 0; r < attempt.launches.size(); ++r) {
      if (attempt.mapping.ranks[r].node != node) continue;
      const api::WorkerKey& wk = attempt.launches[r].key;
      const launch::RankPaths paths = launch::RankPathsFor(options_.rank_root, wk);
      api::WorkerStatus w;
      w.key = wk;
      const bool started = options_.fs->Exists(paths.pid);
      if (auto code = ReadExit(*options_.fs, paths.exit)) {
        w.state = api::WorkerState::kExited;
        w.exit_code = *code;
      } else if (ended) {
        w.state = api::WorkerState::kExited;
        w.exit_code = started ? kKilledExitCode : 1;
      } else if (started) {
        w.state = api::WorkerState::kRunning;
      } else {
        continue;  // Slurm has not started it yet: the attempt is still starting
      }
      std::vector<api::Json> lines = launch::ReadProgressLines(paths.progress, 256);
      const int64_t sent = delivered_step_.contains(wk) ? delivered_step_[wk] : -1;
      for (const api::Json& line : lines) {
        if (line.value("step", int64_t{-1}) > sent) w.progress_lines.push_back(line);
      }
      if (!lines.empty()) w.progress = lines.back();
      w.log_tail = launch::ReadLogTail(paths.log, 100);
      out.push_back(std::move(w));
    }
  }
  return out;
}

Status SlurmPool::Submit(const AttemptKey& key,
                         const std::vector<std::pair<std::string, api::WorkerLaunch>>& ranks,
                         const std::map<std::string, api::Node>& nodes) {
  std::vector<api::WorkerLaunch> launches;
  std::map<int64_t, std::string> rank_nodes;
  for (const auto& [node, launch] : ranks) {
    launches.push_back(launch);
    rank_nodes[launch.key.rank] = node;
  }
  TESSERA_ASSIGN_OR_RETURN(SlurmAttempt attempt,
                           AttemptOf(std::move(launches), rank_nodes, nodes, options_.rank_root));
  const fs::path dir = AttemptDir(options_.rank_root, key.first, key.second);
  const fs::path file = dir / "attempt.json";
  TESSERA_RETURN_IF_ERROR(options_.fs->CreateDirs(dir));
  TESSERA_RETURN_IF_ERROR(WriteFileAtomically(*options_.fs, file, ToJson(attempt).dump() + "\n"));
  HetJobRequest request =
      BuildHetJobRequest(attempt, file.string(), options_.launcher, options_.partition);
  auto id = client_->SubmitHetJob(request);
  if (!id.ok()) {
    options_.fs->Remove(file).IgnoreError();  // not submitted: the next poll tries again
    return id.status();
  }
  spdlog::info("slurm: job {} attempt {}: submitted Slurm job {} ({} ranks, {} components)",
               key.first, key.second, *id, attempt.launches.size(),
               attempt.mapping.components.size());
  attempts_[key] = std::move(attempt);
  return Status::Ok();
}

Status SlurmPool::PollOnce() {
  TESSERA_ASSIGN_OR_RETURN(std::vector<SlurmNode> nodes, client_->ListNodes());
  TESSERA_ASSIGN_OR_RETURN(std::vector<SlurmJob> jobs, client_->ListJobs());

  std::map<AttemptKey, SlurmState> slurm;
  for (const SlurmJob& j : jobs) {
    auto key = ParseJobName(j.name);
    if (!key) continue;
    SlurmState& s = slurm[*key];
    const int64_t leader = j.het_job_id != 0 ? j.het_job_id : j.job_id;
    if (leader > s.leader) {  // the newest submission of that name wins
      s.leader = leader;
      s.states.clear();
    }
    if (leader == s.leader) s.states.push_back(j.state);
  }
  {
    std::lock_guard lock(mu_);
    up_.clear();
    for (const SlurmNode& n : nodes) {
      if (InPartition(n, options_.partition)) up_[n.name] = SlurmNodeUp(n);
    }
    last_ok_ = clock_->SteadyNow();
  }

  Status first_error;
  auto note = [&](const Status& st) {
    if (!st.ok() && first_error.ok()) first_error = st;
  };
  std::map<AttemptKey, std::vector<std::pair<std::string, api::WorkerLaunch>>> desired;
  std::map<std::string, api::Node> node_info;
  for (const SlurmNode& n : nodes) {
    if (!InPartition(n, options_.partition) || !SlurmNodeUp(n)) continue;
    auto gpus = ParseGpuGres(n.gres);
    if (!gpus.ok()) {
      note(gpus.status());
      continue;
    }
    std::vector<std::string> unknown;
    api::HeartbeatRequest hb = HeartbeatFor(n, *gpus, options_.gpu_types, &unknown);
    for (const std::string& t : unknown) {
      if (warned_.insert(n.name + "/" + t).second) {
        spdlog::warn(
            "slurm: node {}: GPU type \"{}\" is not configured (slurm.gpu_types); "
            "its GPUs are not used",
            n.name, t);
      }
    }
    hb.workers = StatusesOn(n.name, slurm);
    auto answer = heartbeat_(api::ToJson(hb));
    if (!answer.ok()) {
      note(answer.status());
      continue;
    }
    auto response = api::HeartbeatResponseFromJson(*answer);
    if (!response.ok()) {
      note(response.status());
      continue;
    }
    for (const api::WorkerStatus& w : hb.workers) {
      for (const api::Json& line : w.progress_lines) {
        int64_t step = line.value("step", int64_t{-1});
        int64_t& sent = delivered_step_.try_emplace(w.key, -1).first->second;
        sent = std::max(sent, step);
      }
    }
    api::Node info;
    info.name = hb.node;
    info.address = hb.address;
    info.devices = hb.devices;
    info.cpu_cores = hb.cpu_cores;
    node_info[n.name] = info;
    for (const api::WorkerLaunch& l : response->desired) {
      desired[{l.key.job_id, l.key.attempt}].emplace_back(n.name, l);
    }
  }

  // New attempts: submit each once, when every rank is desired somewhere.
  for (const auto& [key, ranks] : desired) {
    if (attempts_.contains(key) || AttemptFor(key) != nullptr) continue;
    const int64_t world = launch::EnvInt(ranks.front().second, "WORLD_SIZE").value_or(0);
    if (static_cast<int64_t>(ranks.size()) < world) continue;  // a node of it is not up
    Status st = Submit(key, ranks, node_info);
    if (!st.ok()) {
      spdlog::warn("slurm: job {} attempt {}: cannot submit: {}", key.first, key.second,
                   st.ToString());
      note(st);
    }
  }

  // Attempts tesserad no longer wants: cancel their Slurm jobs, forget them
  // once Slurm has ended them.
  for (auto it = attempts_.begin(); it != attempts_.end();) {
    const AttemptKey key = it->first;
    if (desired.contains(key)) {
      ++it;
      continue;
    }
    auto s = slurm.find(key);
    if (s == slurm.end() || s->second.terminal()) {
      cancelled_.erase(key);
      for (const api::WorkerLaunch& l : it->second.launches) delivered_step_.erase(l.key);
      it = attempts_.erase(it);
      continue;
    }
    if (cancelled_.insert(key).second) {
      Status st = client_->CancelJob(s->second.leader);
      if (st.ok()) {
        spdlog::info("slurm: job {} attempt {}: cancelled Slurm job {}", key.first, key.second,
                     s->second.leader);
      } else if (st.code() != StatusCode::kNotFound) {
        cancelled_.erase(key);  // try again next poll
        note(st);
      }
    }
    ++it;
  }
  return first_error;
}

void SlurmPool::Start() {
  std::lock_guard lock(run_mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] {
    std::string last_error;
    std::unique_lock lock(run_mu_);
    while (!stop_) {
      lock.unlock();
      Status st = PollOnce();
      std::string text = st.ok() ? "" : st.ToString();
      if (text != last_error) {
        if (st.ok()) {
          spdlog::info("slurm: polling works again");
        } else {
          spdlog::warn("slurm: {}", text);
        }
        last_error = text;
      }
      lock.lock();
      run_cv_.wait_for(lock, options_.poll_interval, [this] { return stop_; });
    }
  });
}

void SlurmPool::Stop() {
  {
    std::lock_guard lock(run_mu_);
    stop_ = true;
  }
  run_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace tessera::slurm
