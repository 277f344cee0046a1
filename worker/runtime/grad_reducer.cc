#include "worker/runtime/grad_reducer.h"

#include <chrono>

#include "worker/runtime/seconds_since.h"

namespace tessera::worker {

GradReducer::~GradReducer() {
  for (auto& [t, h] : hooks_) {
    try {
      t.remove_hook(h);
    } catch (...) {
    }
  }
}

void GradReducer::AddGroup(Collectives* comm,
                           std::vector<std::pair<std::string, torch::Tensor>> params,
                           size_t bucket_bytes) {
  if (comm == nullptr || comm->size() <= 1 || params.empty()) return;
  auto g = std::make_unique<Group>();
  g->comm = comm;
  // Backward produces gradients roughly in reverse order of the forward.
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    g->slots.push_back(Slot{it->second, 0, it->second.numel(), false});
  }
  size_t i = 0;
  while (i < g->slots.size()) {
    Bucket b;
    size_t bytes = 0;
    int64_t numel = 0;
    const auto options = g->slots[i].param.options();
    while (i < g->slots.size() && (b.slots.empty() || bytes < bucket_bytes) &&
           g->slots[i].param.options().dtype() == options.dtype()) {
      g->slots[i].offset = numel;
      numel += g->slots[i].numel;
      bytes += static_cast<size_t>(g->slots[i].numel) * g->slots[i].param.element_size();
      b.slots.push_back(i);
      g->slot_bucket.push_back(g->buckets.size());
      ++i;
    }
    b.flat = torch::zeros({numel}, options.requires_grad(false));
    g->buckets.push_back(std::move(b));
  }
  const size_t gi = groups_.size();
  for (size_t s = 0; s < g->slots.size(); ++s) {
    torch::Tensor p = g->slots[s].param;
    unsigned h = p.register_hook([this, gi, s](torch::Tensor grad) { OnGrad(gi, s, grad); });
    hooks_.emplace_back(p, h);
  }
  ResetGroup(*g);
  groups_.push_back(std::move(g));
}

size_t GradReducer::num_buckets() const {
  size_t n = 0;
  for (const auto& g : groups_) n += g->buckets.size();
  return n;
}

void GradReducer::ResetGroup(Group& g) {
  for (Slot& s : g.slots) s.filled = false;
  for (Bucket& b : g.buckets) {
    b.pending = b.slots.size();
    b.work.reset();
    b.launched = false;
  }
  g.next_launch = 0;
  g.error = Status::Ok();
}

void GradReducer::Arm() {
  for (auto& g : groups_) ResetGroup(*g);
  armed_ = true;
}

void GradReducer::OnGrad(size_t group, size_t slot, const torch::Tensor& grad) {
  if (!armed_) return;
  Group& g = *groups_[group];
  Slot& s = g.slots[slot];
  if (s.filled) return;  // a second gradient in one backward: Finish() re-reads .grad
  Bucket& b = g.buckets[g.slot_bucket[slot]];
  torch::NoGradGuard no_grad;
  auto dst = b.flat.narrow(0, s.offset, s.numel);
  const torch::Tensor& acc = s.param.grad();
  if (acc.defined()) {
    dst.copy_((acc + grad).reshape({-1}));
  } else {
    dst.copy_(grad.reshape({-1}));
  }
  s.filled = true;
  if (--b.pending == 0) LaunchReady(g);
}

void GradReducer::LaunchReady(Group& g) {
  while (g.next_launch < g.buckets.size() && g.buckets[g.next_launch].pending == 0) {
    Bucket& b = g.buckets[g.next_launch];
    b.work = g.comm->AllReduceSumAsync({b.flat});
    b.launched = true;
    ++g.next_launch;
  }
}

Status GradReducer::Finish(double* wait_s) {
  armed_ = false;
  Status result;
  double waited = 0;
  torch::NoGradGuard no_grad;
  for (auto& gp : groups_) {
    Group& g = *gp;
    // Parameters without a hook call this backward: use what .grad holds.
    for (size_t si = 0; si < g.slots.size(); ++si) {
      Slot& s = g.slots[si];
      if (s.filled) continue;
      Bucket& b = g.buckets[g.slot_bucket[si]];
      auto dst = b.flat.narrow(0, s.offset, s.numel);
      if (s.param.grad().defined()) {
        dst.copy_(s.param.grad().reshape({-1}));
      } else {
        dst.zero_();
      }
      s.filled = true;
      --b.pending;
    }
    LaunchReady(g);
    const auto t0 = std::chrono::steady_clock::now();
    for (Bucket& b : g.buckets) {
      if (b.work) {
        Status st = b.work->Wait();
        if (!st.ok() && result.ok()) result = st;
        b.work.reset();
      }
    }
    waited += SecondsSince(t0);
    for (Bucket& b : g.buckets) {
      for (size_t si : b.slots) {
        Slot& s = g.slots[si];
        auto src = b.flat.narrow(0, s.offset, s.numel).view(s.param.sizes());
        if (s.param.grad().defined()) {
          s.param.mutable_grad().copy_(src);
        } else {
          s.param.mutable_grad() = src.clone();
        }
      }
    }
  }
  if (wait_s != nullptr) *wait_s = waited;
  return result;
}

}  // namespace tessera::worker
