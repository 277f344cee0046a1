#include "worker/runtime/stage_runner.h"

#include <ATen/autocast_mode.h>

#include <chrono>

#include "worker/runtime/device_memory.h"
#include "worker/runtime/seconds_since.h"

namespace tessera::worker {
namespace {

using Clock = std::chrono::steady_clock;

// Enables CUDA autocast (mixed precision) for the scope when asked.
class AutocastScope {
 public:
  explicit AutocastScope(bool on) : on_(on) {
    if (on_) at::autocast::set_autocast_enabled(at::kCUDA, true);
  }
  ~AutocastScope() {
    if (on_) {
      at::autocast::clear_cache();
      at::autocast::set_autocast_enabled(at::kCUDA, false);
    }
  }

 private:
  bool on_;
};

int ForwardTag(int64_t mb) { return static_cast<int>(2 * mb); }
int BackwardTag(int64_t mb) { return static_cast<int>(2 * mb + 1); }

}  // namespace

Result<std::vector<torch::Tensor>> PackActivation(const Activation& act) {
  std::vector<torch::Tensor> tensors;
  tensors.push_back(act.main);
  for (const auto& c : act.carry) tensors.push_back(c);
  std::vector<int64_t> header{static_cast<int64_t>(tensors.size())};
  for (const auto& t : tensors) {
    header.push_back(static_cast<int64_t>(t.scalar_type()));
    header.push_back(t.dim());
    for (int64_t d : t.sizes()) header.push_back(d);
  }
  if (static_cast<int64_t>(header.size()) > kHeaderLen) {
    return InvalidArgument("activation has too many tensors or dimensions to send");
  }
  header.resize(kHeaderLen, 0);
  std::vector<torch::Tensor> out{torch::tensor(header, torch::kInt64)};
  for (const auto& t : tensors) out.push_back(t.detach().contiguous());
  return out;
}

Result<std::vector<torch::Tensor>> ShapesFromHeader(const torch::Tensor& header) {
  auto h = header.contiguous();
  const int64_t* p = h.data_ptr<int64_t>();
  const int64_t n = p[0];
  int64_t pos = 1;
  std::vector<torch::Tensor> out;
  for (int64_t i = 0; i < n; ++i) {
    if (pos + 2 > kHeaderLen) return Internal("corrupt activation header");
    const auto dtype = static_cast<torch::ScalarType>(p[pos]);
    const int64_t ndim = p[pos + 1];
    pos += 2;
    if (ndim < 0 || pos + ndim > kHeaderLen) return Internal("corrupt activation header");
    std::vector<int64_t> shape(p + pos, p + pos + ndim);
    pos += ndim;
    out.push_back(torch::empty(shape, torch::TensorOptions().dtype(dtype)));
  }
  return out;
}

void StageRunner::EndCompute(const EmulatedDevice::Segment& start) {
  const EmulatedDevice::SegmentTimes t = c_.emulated.End(start);
  stats_.compute_s += t.busy_s;
  stats_.compute_cpu_s += t.cpu_s;
}

Status StageRunner::WaitSends(bool forward, int64_t up_to) {
  Status first;
  for (auto it = sends_.begin(); it != sends_.end();) {
    if (it->forward != forward || it->micro_batch > up_to) {
      ++it;
      continue;
    }
    Status s = it->work->Wait();
    if (!s.ok() && first.ok()) first = s;
    it = sends_.erase(it);
  }
  return first;
}

Status StageRunner::Forward(int64_t step_first_id, int64_t mb) {
  const RankRole& role = c_.role;
  InFlight& f = flight_[static_cast<size_t>(mb)];
  Activation act;
  const int64_t first_id = step_first_id + role.sample_offset + offsets_[mb];
  SampleBatch batch;
  if (role.first_stage() || role.last_stage()) {
    TESSERA_ASSIGN_OR_RETURN(batch, c_.data->Load(first_id, sizes_[mb]));
  }
  if (role.first_stage()) {
    act.main = ToDevice(batch.input, c_.device);
  } else {
    auto t0 = Clock::now();
    torch::Tensor header =
        torch::empty({kHeaderLen}, torch::TensorOptions(torch::kInt64).device(c_.comm_device));
    TESSERA_RETURN_IF_ERROR(c_.p2p->Recv({header}, role.prev_rank, ForwardTag(mb)));
    TESSERA_ASSIGN_OR_RETURN(auto tensors, ShapesFromHeader(header.to(torch::kCPU)));
    for (auto& t : tensors) t = t.to(c_.comm_device);
    TESSERA_RETURN_IF_ERROR(c_.p2p->Recv(tensors, role.prev_rank, ForwardTag(mb)));
    stats_.bubble_s += SecondsSince(t0);
    if (c_.schedule == Schedule::k1F1B) {
      // 1F1B: the previous stage sends activation mb right after its backward of
      // mb - (S - s) - 1 (its warm-up is S - s forwards), so it has received our
      // gradients up to that micro-batch: those sends are done, free their buffers.
      TESSERA_RETURN_IF_ERROR(WaitSends(false, mb - (role.num_stages - role.stage) - 1));
    }
    for (auto& t : tensors) {
      t = t.to(c_.device);
      if (t.is_floating_point()) t.set_requires_grad(true);
      f.inputs.push_back(t);
    }
    act.main = tensors[0];
    act.carry.assign(tensors.begin() + 1, tensors.end());
  }
  const EmulatedDevice::Segment t0 = c_.emulated.Begin();
  Activation out;
  {
    AutocastScope autocast(c_.autocast);
    out = c_.model->Forward(std::move(act), static_cast<size_t>(role.layer_begin),
                            static_cast<size_t>(role.layer_end));
  }
  if (c_.autocast) {
    // Activations and the loss travel and are computed in float32.
    if (out.main.is_floating_point()) out.main = out.main.to(torch::kFloat32);
    for (auto& t : out.carry) {
      if (t.is_floating_point()) t = t.to(torch::kFloat32);
    }
  }
  if (role.last_stage()) {
    const double scale = static_cast<double>(sizes_[mb]) / static_cast<double>(c_.global_batch);
    torch::Tensor loss = c_.model->Loss(out, ToDevice(batch.target, c_.device)) * scale;
    stats_.loss_contribution += loss.item<double>();
    f.loss = c_.loss_scale != 1.0 ? loss * c_.loss_scale : loss;
  }
  EndCompute(t0);
  if (!role.last_stage()) {
    f.outputs.push_back(out.main);
    for (auto& t : out.carry) f.outputs.push_back(t);
    TESSERA_ASSIGN_OR_RETURN(auto packed, PackActivation(out));
    for (auto& t : packed) t = t.to(c_.comm_device);
    sends_.push_back({true, mb, c_.p2p->SendAsync({packed[0]}, role.next_rank, ForwardTag(mb))});
    packed.erase(packed.begin());
    sends_.push_back(
        {true, mb, c_.p2p->SendAsync(std::move(packed), role.next_rank, ForwardTag(mb))});
  }
  return Status::Ok();
}

Status StageRunner::Backward(int64_t mb) {
  const RankRole& role = c_.role;
  InFlight& f = flight_[static_cast<size_t>(mb)];
  if (role.last_stage()) {
    const EmulatedDevice::Segment t0 = c_.emulated.Begin();
    f.loss.backward();
    EndCompute(t0);
  } else {
    std::vector<torch::Tensor> grads;
    for (const auto& o : f.outputs) {
      if (o.is_floating_point()) {
        grads.push_back(torch::empty(o.sizes(), o.options().device(c_.comm_device)));
      }
    }
    auto r0 = Clock::now();
    TESSERA_RETURN_IF_ERROR(BackP2p().Recv(grads, role.next_rank, BackwardTag(mb)));
    stats_.bubble_s += SecondsSince(r0);
    // The next stage computed micro-batch mb before sending its gradient: our
    // activation sends of mb (and earlier) are done.
    TESSERA_RETURN_IF_ERROR(WaitSends(true, mb));
    std::vector<torch::Tensor> outs, gs;
    size_t gi = 0;
    for (const auto& o : f.outputs) {
      if (!o.is_floating_point()) continue;
      if (o.requires_grad()) {
        outs.push_back(o);
        gs.push_back(grads[gi].to(o.device()));
      }
      ++gi;
    }
    const EmulatedDevice::Segment t0 = c_.emulated.Begin();
    if (!outs.empty()) torch::autograd::backward(outs, gs);
    EndCompute(t0);
  }
  if (!role.first_stage()) {
    std::vector<torch::Tensor> in_grads;
    for (const auto& in : f.inputs) {
      if (!in.is_floating_point()) continue;
      in_grads.push_back(
          in.grad().defined()
              ? in.grad().to(c_.comm_device).contiguous()
              : torch::zeros(in.sizes(), in.options().device(c_.comm_device).requires_grad(false)));
    }
    sends_.push_back(
        {false, mb, BackP2p().SendAsync(std::move(in_grads), role.prev_rank, BackwardTag(mb))});
  }
  f = InFlight{};  // free the graph and saved tensors
  return Status::Ok();
}

Result<StepStats> StageRunner::RunStep(int64_t step_first_id) {
  stats_ = StepStats{};
  sizes_ = SplitMicroBatches(c_.role.replica_batch, c_.micro_batches);
  const int64_t m = static_cast<int64_t>(sizes_.size());
  offsets_.assign(sizes_.size(), 0);
  for (size_t i = 1; i < sizes_.size(); ++i) offsets_[i] = offsets_[i - 1] + sizes_[i - 1];
  flight_.assign(sizes_.size(), InFlight{});
  sends_.clear();
  int64_t backward_done = 0;
  auto backward = [&](int64_t mb) -> Status {
    if (backward_done == m - 1 && c_.reducer != nullptr) c_.reducer->Arm();
    ++backward_done;
    return Backward(mb);
  };
  if (c_.schedule == Schedule::kGPipe) {
    for (int64_t i = 0; i < m; ++i) TESSERA_RETURN_IF_ERROR(Forward(step_first_id, i));
    for (int64_t i = 0; i < m; ++i) TESSERA_RETURN_IF_ERROR(backward(i));
  } else {
    const int64_t warm = std::min<int64_t>(c_.role.num_stages - c_.role.stage - 1, m);
    for (int64_t i = 0; i < warm; ++i) TESSERA_RETURN_IF_ERROR(Forward(step_first_id, i));
    for (int64_t i = warm; i < m; ++i) {
      TESSERA_RETURN_IF_ERROR(Forward(step_first_id, i));
      TESSERA_RETURN_IF_ERROR(backward(i - warm));
    }
    for (int64_t i = m - warm; i < m; ++i) TESSERA_RETURN_IF_ERROR(backward(i));
  }
  auto t0 = Clock::now();
  Status send_status;
  for (auto& w : sends_) {
    Status s = w.work->Wait();
    if (!s.ok() && send_status.ok()) send_status = s;
  }
  sends_.clear();
  stats_.comm_s += SecondsSince(t0);
  TESSERA_RETURN_IF_ERROR(send_status);
  if (c_.reducer != nullptr) {
    double waited = 0;
    TESSERA_RETURN_IF_ERROR(c_.reducer->Finish(&waited));
    stats_.comm_s += waited;
  }
  return stats_;
}

}  // namespace tessera::worker
