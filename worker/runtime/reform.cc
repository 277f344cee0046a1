#include "worker/runtime/reform.h"

#include <sys/stat.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "worker/runtime/await_work.h"
#include "worker/runtime/resume.h"

namespace tessera::worker {

Result<ReformOrder> ParseReformOrder(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgument("must be a JSON object", "reform");
  ReformOrder order;
  auto g = j.find("generation");
  if (g == j.end() || !g->is_number_integer() || g->get<int64_t>() < 1) {
    return InvalidArgument("must be an integer of at least 1", "reform.generation");
  }
  order.generation = g->get<int64_t>();
  if (auto left_out = j.find("left_out"); left_out != j.end()) {
    if (!left_out->is_boolean()) return InvalidArgument("must be true or false", "reform.left_out");
    order.left_out = left_out->get<bool>();
    if (order.left_out) return order;
  }
  auto env = j.find("env");
  if (env == j.end() || !env->is_object()) {
    return InvalidArgument("must be an object of strings", "reform.env");
  }
  for (const auto& [k, v] : env->items()) {
    if (!v.is_string()) return InvalidArgument("must be a string", "reform.env." + k);
    order.env[k] = v.get<std::string>();
  }
  auto plan = j.find("plan");
  if (plan == j.end() || !plan->is_object()) {
    return InvalidArgument("must be a rank plan object", "reform.plan");
  }
  order.plan_text = plan->dump();
  return order;
}

Result<DistEnv> ReformedEnv(const DistEnv& env, const ReformOrder& order) {
  static const char* const kKeys[] = {"RANK",        "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                      "MASTER_ADDR", "MASTER_PORT"};
  for (const char* k : kKeys) {
    if (!order.env.contains(k))
      return InvalidArgument("is missing", std::string("reform.env.") + k);
  }
  // Everything else stays as the rank was started; the order's keys win.
  std::map<std::string, std::string> vars = {
      {"WORLD_SIZE", std::to_string(env.world_size)},
      {"MASTER_PORT", std::to_string(env.master_port)},
      {"TESSERA_ATTEMPT", std::to_string(env.attempt)},
  };
  for (const auto& [k, v] : order.env) vars[k] = v;
  Result<DistEnv> read = ReadDistEnv([&](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
  if (!read.ok()) return read.status().WithPrefix("reform");
  DistEnv out = env;
  out.rank = read->rank;
  out.world_size = read->world_size;
  out.local_rank = read->local_rank;
  out.local_world_size = read->local_world_size;
  out.master_addr = read->master_addr;
  out.master_port = read->master_port;
  return out;
}

ReformWatcher::ReformWatcher(std::string path, int64_t current)
    : path_(std::move(path)), current_(current) {
  if (!path_.empty()) thread_ = std::thread([this] { Loop(); });
}

ReformWatcher::~ReformWatcher() {
  quit_.store(true);
  if (thread_.joinable()) thread_.join();
}

void ReformWatcher::SetCurrent(int64_t generation) {
  MutexLock lock(mu_);
  current_ = generation;
}

std::optional<ReformOrder> ReadReformOrder(const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  Result<ReformOrder> order = ParseReformOrder(ss.str());
  if (!order.ok()) return std::nullopt;
  return *std::move(order);
}

std::optional<ReformOrder> ReformWatcher::ReadNewer() {
  // Parsed again only when the file changed (agents replace it by rename).
  struct stat st;
  if (::stat(path_.c_str(), &st) == 0) {
    const std::pair<int64_t, int64_t> key{
        static_cast<int64_t>(st.st_ino),
        static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
    bool changed = false;
    {
      MutexLock lock(mu_);
      changed = key != seen_;
      seen_ = key;
    }
    if (changed) {
      std::optional<ReformOrder> order = ReadReformOrder(path_);
      MutexLock lock(mu_);
      if (order && (!newest_ || order->generation > newest_->generation)) newest_ = order;
    }
  }
  MutexLock lock(mu_);
  if (newest_ && newest_->generation > current_) return newest_;
  return std::nullopt;
}

void ReformWatcher::Loop() {
  while (!quit_.load()) {
    if (ReadNewer()) {
      // Checked again under the lock SetCurrent takes: the trainer may have
      // taken this order between ReadNewer and here, and the collectives of
      // the world it now forms must not be abandoned (they would wait for an
      // order that never comes). The trainer resumes collectives only after
      // SetCurrent, so an abandon made here before it is undone.
      MutexLock lock(mu_);
      if (newest_ && newest_->generation > current_ && !CollectivesAbandoned()) {
        AbandonCollectives();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::optional<ReformOrder> ReformWatcher::Await(std::chrono::milliseconds timeout,
                                                const std::atomic<bool>& stop) {
  if (path_.empty()) return std::nullopt;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!stop.load() && std::chrono::steady_clock::now() < deadline) {
    if (auto order = ReadNewer()) return order;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

Result<ReformAgreement> AgreeOnState(const std::vector<HeldLayers>& held,
                                     const std::vector<std::pair<int64_t, int64_t>>& need) {
  if (held.size() != need.size()) return InvalidArgument("one held and one need per rank");
  ReformAgreement a;
  for (const HeldLayers& h : held) a.step = std::max(a.step, h.step);
  for (const HeldLayers& h : held) {
    if (h.step == a.step && h.layer_begin < h.layer_end) {
      a.samples = h.samples;
      break;
    }
  }
  auto holds = [&](size_t r, int64_t layer) {
    return held[r].layer_begin <= layer && layer < held[r].layer_end;
  };
  for (size_t dst = 0; dst < need.size(); ++dst) {
    for (int64_t layer = need[dst].first; layer < need[dst].second; ++layer) {
      if (holds(dst, layer) && held[dst].step == a.step) continue;
      // The holder at the newest step, lowest rank first.
      std::optional<size_t> src;
      for (size_t r = 0; r < held.size(); ++r) {
        if (holds(r, layer) && (!src || held[r].step > held[*src].step)) src = r;
      }
      if (src && *src == dst) continue;  // its own is the newest there is
      a.transfers.push_back(
          {layer, src ? static_cast<int>(*src) : kFromCheckpoint, static_cast<int>(dst)});
    }
  }
  return a;
}

namespace {

// A layer's state: its parameters and buffers, and the optimizer slots of its
// parameters, all on the CPU.
c10::Dict<std::string, at::Tensor> LayerState(
    const LayeredModel& model, int64_t layer,
    const std::map<std::string, torch::Tensor>& optimizer_state) {
  c10::Dict<std::string, at::Tensor> out;
  const auto l = static_cast<size_t>(layer);
  for (auto& [n, t] : model.NamedParameters(l, l + 1)) {
    out.insert(n, t.detach().cpu());
    for (auto it = optimizer_state.lower_bound(n + "#");
         it != optimizer_state.end() && it->first.rfind(n + "#", 0) == 0; ++it) {
      out.insert(it->first, it->second.detach().cpu());
    }
  }
  for (auto& [n, t] : model.NamedBuffers(l, l + 1)) out.insert(n, t.detach().cpu());
  return out;
}

Status RestoreLayer(LayeredModel& model, int64_t layer,
                    const c10::Dict<std::string, at::Tensor>& got,
                    std::map<std::string, torch::Tensor>* optimizer_state) {
  torch::NoGradGuard no_grad;
  const auto l = static_cast<size_t>(layer);
  auto take = [&](const std::string& name, torch::Tensor& into) -> Status {
    if (!got.contains(name))
      return Internal("re-formed state of layer " + std::to_string(layer) + " lacks " + name);
    const at::Tensor t = got.at(name);
    if (t.sizes() != into.sizes()) return Internal(name + " arrived with another shape");
    into.copy_(t);
    return Status::Ok();
  };
  for (auto& [n, t] : model.NamedParameters(l, l + 1)) {
    TESSERA_RETURN_IF_ERROR(take(n, t));
    // The sender's optimizer slots of this parameter replace this rank's.
    const std::string slot = n + "#";
    for (auto it = optimizer_state->lower_bound(slot);
         it != optimizer_state->end() && it->first.rfind(slot, 0) == 0;) {
      it = optimizer_state->erase(it);
    }
    for (const auto& entry : got) {
      if (entry.key().rfind(slot, 0) == 0) {
        (*optimizer_state)[entry.key()] = entry.value().to(t.device());
      }
    }
  }
  for (auto& [n, t] : model.NamedBuffers(l, l + 1)) TESSERA_RETURN_IF_ERROR(take(n, t));
  return Status::Ok();
}

// Layers no survivor holds, from the newest complete checkpoint.
Status LoadLayersFromCheckpoint(const std::string& dir, const std::vector<int64_t>& layers,
                                LayeredModel& model,
                                std::map<std::string, torch::Tensor>* optimizer_state) {
  std::vector<std::string> names;
  for (int64_t l : layers) {
    const auto i = static_cast<size_t>(l);
    for (auto& [n, t] : model.NamedParameters(i, i + 1)) names.push_back(n);
    for (auto& [n, t] : model.NamedBuffers(i, i + 1)) names.push_back(n);
  }
  const std::string what = "layers " + std::to_string(layers.front()) + "-" +
                           std::to_string(layers.back()) + " (no survivor holds them)";
  if (dir.empty()) return FailedPrecondition(what + ": no checkpoint folder");
  CheckpointRead read = ReadNewestCheckpoint(dir, names);
  if (!read.manifest) return FailedPrecondition(what + ": no complete checkpoint in " + dir);
  if (!read.tensors.ok()) return read.tensors.status().WithPrefix(what);
  c10::Dict<std::string, at::Tensor> got;
  for (const auto& [n, t] : *read.tensors) got.insert(n, t);
  for (int64_t l : layers) {
    Status restored = RestoreLayer(model, l, got, optimizer_state);
    if (!restored.ok()) {
      return FailedPrecondition(what + ": checkpoint step-" + std::to_string(read.manifest->step) +
                                " lacks them: " + restored.message());
    }
  }
  std::fprintf(stderr, "%s loaded from checkpoint step-%lld\n", what.c_str(),
               static_cast<long long>(read.manifest->step));
  return Status::Ok();
}

}  // namespace

Result<ReformAgreement> SyncReformedState(Collectives& world, const HeldLayers& mine,
                                          std::pair<int64_t, int64_t> need, LayeredModel& model,
                                          std::map<std::string, torch::Tensor>* optimizer_state,
                                          torch::Device comm_device,
                                          const std::string& checkpoint_dir) {
  const int me = world.rank();
  const int n = world.size();
  nlohmann::json said = {{"step", mine.step},
                         {"samples", mine.samples},
                         {"held", {mine.layer_begin, mine.layer_end}},
                         {"need", {need.first, need.second}}};
  TESSERA_RETURN_IF_ERROR(world.StoreSet("reform/rank-" + std::to_string(me), said.dump()));
  std::vector<HeldLayers> held(static_cast<size_t>(n));
  std::vector<std::pair<int64_t, int64_t>> needs(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    TESSERA_ASSIGN_OR_RETURN(std::string text, world.StoreGet("reform/rank-" + std::to_string(r)));
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object()) return Internal("rank " + std::to_string(r) + " said no state");
    held[static_cast<size_t>(r)] = {j["step"].get<int64_t>(), j["held"][0].get<int64_t>(),
                                    j["held"][1].get<int64_t>(), j["samples"].get<int64_t>()};
    needs[static_cast<size_t>(r)] = {j["need"][0].get<int64_t>(), j["need"][1].get<int64_t>()};
  }
  TESSERA_ASSIGN_OR_RETURN(ReformAgreement agreement, AgreeOnState(held, needs));
  // Sends are asynchronous and every rank runs the list in the same order, so
  // a rank waits only on a receive whose sender reaches it next.
  std::vector<std::unique_ptr<CommWork>> sends;
  std::vector<torch::Tensor> keep;
  const auto u8 = torch::TensorOptions().dtype(torch::kUInt8);
  const auto i64 = torch::TensorOptions().dtype(torch::kInt64);
  std::vector<int64_t> from_checkpoint;
  for (size_t i = 0; i < agreement.transfers.size(); ++i) {
    const LayerTransfer& t = agreement.transfers[i];
    const int tag = 7000 + 2 * static_cast<int>(i);
    if (t.src == kFromCheckpoint) {
      if (t.dst == me) from_checkpoint.push_back(t.layer);
      continue;
    }
    if (t.src == me) {
      std::vector<char> bytes =
          torch::pickle_save(c10::IValue(LayerState(model, t.layer, *optimizer_state)));
      torch::Tensor size = torch::tensor({static_cast<int64_t>(bytes.size())}, i64).to(comm_device);
      torch::Tensor data = torch::empty({static_cast<int64_t>(bytes.size())}, u8);
      std::memcpy(data.data_ptr(), bytes.data(), bytes.size());
      data = data.to(comm_device);
      keep.push_back(size);
      keep.push_back(data);
      sends.push_back(world.SendAsync({size}, t.dst, tag));
      sends.push_back(world.SendAsync({data}, t.dst, tag + 1));
    } else if (t.dst == me) {
      torch::Tensor size = torch::zeros({1}, i64).to(comm_device);
      TESSERA_RETURN_IF_ERROR(world.Recv({size}, t.src, tag));
      torch::Tensor data = torch::empty({size.cpu().item<int64_t>()}, u8).to(comm_device);
      TESSERA_RETURN_IF_ERROR(world.Recv({data}, t.src, tag + 1));
      data = data.cpu().contiguous();
      std::vector<char> bytes(static_cast<size_t>(data.numel()));
      std::memcpy(bytes.data(), data.data_ptr(), bytes.size());
      c10::IValue value = torch::pickle_load(bytes);
      if (!value.isGenericDict()) return Internal("re-formed state is not a dictionary");
      c10::Dict<std::string, at::Tensor> got;
      for (const auto& e : value.toGenericDict()) {
        got.insert(e.key().toStringRef(), e.value().toTensor());
      }
      TESSERA_RETURN_IF_ERROR(RestoreLayer(model, t.layer, got, optimizer_state));
    }
  }
  for (auto& s : sends) TESSERA_RETURN_IF_ERROR(s->Wait());
  if (!from_checkpoint.empty()) {
    TESSERA_RETURN_IF_ERROR(
        LoadLayersFromCheckpoint(checkpoint_dir, from_checkpoint, model, optimizer_state));
  }
  return agreement;
}

}  // namespace tessera::worker
