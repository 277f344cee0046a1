#include "daemon/controller/attempt_launch.h"

#include "api/entrypoint_kind.h"
#include "scheduler/plan_json.h"

namespace tessera::daemon {
namespace {

std::vector<std::string> CommandLine(const api::Job& job, const EntrypointCommand& entrypoint,
                                     const LaunchOptions& options) {
  const api::JobSpec& s = job.spec;
  std::vector<std::string> argv;
  switch (api::EntrypointKindOf(entrypoint.name)) {
    case api::EntrypointKind::kBuiltin:
      argv = {options.worker_binary, s.kind == api::JobKind::kInfer ? "infer" : "train", "--model",
              std::string(api::EntrypointId(entrypoint.name))};
      if (!s.dataset.empty()) {
        argv.insert(argv.end(), {"--data", s.dataset});
      }
      if (s.kind == api::JobKind::kTrain) {
        argv.insert(argv.end(), {"--steps", std::to_string(s.steps), "--checkpoint-every-s",
                                 std::to_string(s.checkpoint_every_s)});
      } else {
        if (!s.output.empty()) argv.insert(argv.end(), {"--output", s.output});
        if (!s.checkpoint.empty()) argv.insert(argv.end(), {"--checkpoint", s.checkpoint});
      }
      break;
    case api::EntrypointKind::kModel: {
      // An exported model file the admin registered; its weights are inside it
      // (ValidateJobSpec: no checkpoint). Training resumes from the job's own.
      if (s.kind == api::JobKind::kTrain) {
        argv = {options.worker_binary,
                "train",
                "--model-file",
                entrypoint.command,
                "--data",
                s.dataset,
                "--steps",
                std::to_string(s.steps),
                "--checkpoint-every-s",
                std::to_string(s.checkpoint_every_s)};
      } else {
        argv = {options.worker_binary,
                "infer",
                "--model-file",
                entrypoint.command,
                "--data",
                s.dataset,
                "--output",
                s.output};
      }
      const std::vector<std::string> image = api::ImageConventionArgs(s.image);
      argv.insert(argv.end(), image.begin(), image.end());
      break;
    }
    case api::EntrypointKind::kCommand:
    case api::EntrypointKind::kUnknown:
      argv = {entrypoint.command};
      break;
  }
  argv.insert(argv.end(), s.args.begin(), s.args.end());
  return argv;
}

}  // namespace

int MasterPortFor(api::JobId job, int64_t attempt, const LaunchOptions& options) {
  int64_t slot = (job * 7 + attempt) % options.master_port_span;
  return options.master_port_base + static_cast<int>(slot);
}

Result<int> PickMasterPort(api::JobId job, int64_t attempt, const std::set<int>& taken,
                           const LaunchOptions& options) {
  const int first = MasterPortFor(job, attempt, options);
  for (int i = 0; i < options.master_port_span; ++i) {
    const int port = options.master_port_base +
                     (first - options.master_port_base + i) % options.master_port_span;
    if (!taken.contains(port)) return port;
  }
  return ResourceExhausted("every rendezvous port " + std::to_string(options.master_port_base) +
                           ".." +
                           std::to_string(options.master_port_base + options.master_port_span - 1) +
                           " is held by a live attempt at the master's address");
}

void AddMasterPort(const AttemptLaunch& launch, MasterPortsInUse* in_use) {
  if (launch.ranks.empty()) return;
  const auto& env = launch.ranks.front().launch.env;
  auto addr = env.find("MASTER_ADDR");
  auto port = env.find("MASTER_PORT");
  if (addr == env.end() || port == env.end()) return;
  try {
    (*in_use)[addr->second].insert(std::stoi(port->second));
  } catch (const std::exception&) {
    // a damaged stored launch holds no port
  }
}

Result<AttemptLaunch> BuildAttemptLaunch(const api::Job& job, int64_t attempt,
                                         const scheduler::Plan& plan, const api::Json& plan_json,
                                         const EntrypointCommand& entrypoint,
                                         const std::map<std::string, std::string>& addresses,
                                         const LaunchOptions& options,
                                         const MasterPortsInUse& in_use) {
  AttemptLaunch out;
  out.job_id = job.id;
  out.attempt = attempt;
  out.plan = plan_json;

  // Number ranks replica by replica, stage by stage.
  struct Slot {
    scheduler::DeviceId device;
    size_t replica = 0;
  };
  std::vector<Slot> slots;
  api::Json replicas = api::Json::array();
  // The first sample of each replica within a global batch.
  std::vector<int64_t> sample_offset;
  int64_t global_batch = 0;
  for (const scheduler::Replica& replica : plan.replicas) {
    sample_offset.push_back(global_batch);
    global_batch += replica.batch;
    api::Json stages = api::Json::array();
    for (const scheduler::Stage& stage : replica.stages) {
      if (stage.devices.size() != 1) {
        return InvalidArgument("every stage must hold exactly one device", "plan");
      }
      int rank = static_cast<int>(slots.size());
      slots.push_back({stage.devices[0], sample_offset.size() - 1});
      stages.push_back({{"rank", rank},
                        {"device", stage.devices[0].ToString()},
                        {"layers", {stage.layer_begin, stage.layer_end}},
                        {"peak_memory_bytes", stage.peak_memory_bytes}});
    }
    replicas.push_back({{"batch", replica.batch}, {"stages", stages}});
  }
  if (slots.empty()) return InvalidArgument("plan has no stage", "plan");
  out.infer = job.spec.kind == api::JobKind::kInfer;
  out.rank_plan = {{"layout", scheduler::LayoutName(plan.layout)},
                   {"global_batch", job.spec.global_batch},
                   {"micro_batches", plan.micro_batches},
                   {"schedule", scheduler::ScheduleName(plan.schedule)},
                   {"replicas", replicas}};
  if (plan.tiling) {
    out.rank_plan["tiling"] = {{"tile_px", plan.tiling->tile_px},
                               {"overlap_px", plan.tiling->overlap_px},
                               {"tiles_per_image", plan.tiling->tiles_per_image}};
  }

  auto master = addresses.find(slots[0].device.node);
  if (master == addresses.end()) {
    return InvalidArgument("planned node " + slots[0].device.node + " is unknown", "plan");
  }
  std::map<std::string, int> per_node;
  std::map<std::string, int> group_rank;  // nodes in the order of their first rank
  for (const Slot& s : slots) {
    per_node[s.device.node]++;
    group_rank.emplace(s.device.node, static_cast<int>(group_rank.size()));
  }
  static const std::set<int> kNone;
  auto taken = in_use.find(master->second);
  TESSERA_ASSIGN_OR_RETURN(
      const int master_port,
      PickMasterPort(job.id, attempt, taken == in_use.end() ? kNone : taken->second, options));
  auto account = options.run_as.find(job.owner);
  std::map<std::string, int> next_local;
  const int world = static_cast<int>(slots.size());
  const std::vector<std::string> argv = CommandLine(job, entrypoint, options);
  for (int rank = 0; rank < world; ++rank) {
    const scheduler::DeviceId& dev = slots[rank].device;
    if (!addresses.contains(dev.node)) {
      return InvalidArgument("planned node " + dev.node + " is unknown", "plan");
    }
    RankLaunch r;
    r.node = dev.node;
    r.device_index = dev.index;
    api::WorkerLaunch& l = r.launch;
    l.key = {job.id, attempt, rank};
    l.argv = argv;
    // The job's env first, so the contract below always wins.
    l.env = job.spec.env;
    // torchrun's contract (torch.distributed.run, "Environment Variables").
    l.env["RANK"] = std::to_string(rank);
    l.env["WORLD_SIZE"] = std::to_string(world);
    l.env["LOCAL_RANK"] = std::to_string(next_local[dev.node]++);
    l.env["LOCAL_WORLD_SIZE"] = std::to_string(per_node[dev.node]);
    l.env["GROUP_RANK"] = std::to_string(group_rank.at(dev.node));
    l.env["GROUP_WORLD_SIZE"] = std::to_string(group_rank.size());
    l.env["ROLE_RANK"] = l.env["RANK"];
    l.env["ROLE_WORLD_SIZE"] = l.env["WORLD_SIZE"];
    l.env["ROLE_NAME"] = "default";
    l.env["MASTER_ADDR"] = master->second;
    l.env["MASTER_PORT"] = std::to_string(master_port);
    l.env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(attempt - 1);
    l.env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(job.spec.max_attempts - 1);
    l.env["TORCHELASTIC_RUN_ID"] = "tessera-job-" + std::to_string(job.id);
    // The rendezvous store is MASTER_ADDR:MASTER_PORT, hosted by rank 0.
    l.env.erase("TORCHELASTIC_USE_AGENT_STORE");
    // NCCL errors and timeouts end the process instead of hanging it.
    l.env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1";
    l.env["NCCL_ASYNC_ERROR_HANDLING"] = "1";  // its name before PyTorch 2.2
    // Tessera's own.
    l.env["TESSERA_JOB_ID"] = std::to_string(job.id);
    l.env["TESSERA_ATTEMPT"] = std::to_string(attempt);
    l.env["TESSERA_CHECKPOINT_DIR"] = options.checkpoint_root + "/job-" + std::to_string(job.id);
    l.env["TESSERA_COLLECTIVE_TIMEOUT_S"] = std::to_string(options.collective_timeout_s);
    const size_t replica = slots[rank].replica;
    l.env["TESSERA_LOCAL_BATCH"] = std::to_string(plan.replicas[replica].batch);
    l.env["TESSERA_GLOBAL_BATCH"] = std::to_string(global_batch);
    l.env["TESSERA_SAMPLE_OFFSET"] = std::to_string(sample_offset[replica]);
    if (out.infer) {
      // A cmd: infer script finds its input and output here (python/tessera_lease.py).
      l.env["TESSERA_INFER_DATASET"] = job.spec.dataset;
      l.env["TESSERA_INFER_OUTPUT"] = job.spec.output;
    }
    l.device_indices = {dev.index};
    l.plan = out.rank_plan;
    if (account != options.run_as.end()) l.run_as = account->second;
    out.ranks.push_back(std::move(r));
  }
  return out;
}

api::Json ToJson(const AttemptLaunch& a) {
  api::Json ranks = api::Json::array();
  for (const RankLaunch& r : a.ranks) {
    api::Json l = api::ToJson(r.launch);
    l.erase("plan");  // stored once, in rank_plan
    ranks.push_back({{"node", r.node}, {"device_index", r.device_index}, {"launch", l}});
  }
  return {{"job_id", a.job_id},       {"attempt", a.attempt}, {"plan", a.plan},
          {"rank_plan", a.rank_plan}, {"infer", a.infer},     {"ranks", ranks}};
}

Result<AttemptLaunch> AttemptLaunchFromJson(const api::Json& j) {
  try {
    AttemptLaunch a;
    a.job_id = j.at("job_id").get<int64_t>();
    a.attempt = j.at("attempt").get<int64_t>();
    a.plan = j.at("plan");
    a.rank_plan = j.at("rank_plan");
    a.infer = j.value("infer", false);
    for (const api::Json& r : j.at("ranks")) {
      RankLaunch rl;
      rl.node = r.at("node").get<std::string>();
      rl.device_index = r.at("device_index").get<int64_t>();
      api::Json wrapped = {{"desired", api::Json::array({r.at("launch")})}};
      auto parsed = api::HeartbeatResponseFromJson(wrapped);
      if (!parsed.ok()) return parsed.status().WithPrefix("stored launch");
      rl.launch = parsed->desired.at(0);
      rl.launch.plan = a.rank_plan;
      a.ranks.push_back(std::move(rl));
    }
    return a;
  } catch (const api::Json::exception& e) {
    return Internal(std::string("stored attempt launch is malformed: ") + e.what());
  }
}

api::Json StoredAttemptJson(const AttemptLaunch& launch, const std::set<int64_t>& dropped) {
  api::Json j = ToJson(launch);
  if (!dropped.empty()) j["dropped_ranks"] = dropped;
  return j;
}

Result<std::set<int64_t>> DroppedRanksOf(const api::Json& stored, const AttemptLaunch& launch) {
  std::set<int64_t> out;
  if (!stored.is_object() || !stored.contains("dropped_ranks")) return out;
  const api::Json& list = stored["dropped_ranks"];
  if (!list.is_array()) return Internal("stored attempt's dropped_ranks is not a list");
  for (const api::Json& r : list) {
    if (!r.is_number_integer() || r.get<int64_t>() < 0 ||
        r.get<int64_t>() >= static_cast<int64_t>(launch.ranks.size())) {
      return Internal("stored attempt's dropped_ranks names no rank of it: " + r.dump());
    }
    out.insert(r.get<int64_t>());
  }
  return out;
}

}  // namespace tessera::daemon
