#include "worker/model/profile.h"

#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/cpu_time.h"
#include "worker/model/batch_norm.h"

namespace tessera::worker {
namespace {

// Wraps the current CPU allocator and counts live bytes. It keeps the raw
// allocator contract (data == context, raw_deleter) that MKL-DNN relies on.
class CountingAllocator final : public c10::Allocator {
 public:
  // REQUIRES: base has a raw deleter (the default CPU allocator does).
  void set_base(c10::Allocator* base) {
    std::lock_guard<std::mutex> lock(mu_);
    base_ = base;
    base_deleter_ = base->raw_deleter();
  }
  int64_t live() const { return live_.load(); }
  // Largest live() since the last ResetPeak().
  int64_t peak() const { return peak_.load(); }
  void ResetPeak() { peak_.store(live_.load()); }
  bool can_wrap(c10::Allocator* base) const { return base->raw_deleter() != nullptr; }

  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    if (data == nullptr || data != inner.get_context()) return inner;  // cannot count it
    const c10::Device device = inner.device();
    inner.release_context();
    {
      std::lock_guard<std::mutex> lock(mu_);
      sizes_[data] = Entry{static_cast<int64_t>(n), base_deleter_};
    }
    const int64_t now = live_.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return c10::DataPtr(data, data, &Delete, device);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &Delete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  struct Entry {
    int64_t bytes;
    c10::DeleterFnPtr deleter;
  };
  static void Delete(void* p);

  mutable std::mutex mu_;
  c10::Allocator* base_ = nullptr;
  c10::DeleterFnPtr base_deleter_ = nullptr;
  mutable std::unordered_map<void*, Entry> sizes_;
  mutable std::atomic<int64_t> live_{0};
  mutable std::atomic<int64_t> peak_{0};
};

// Never destroyed: tensors allocated through it may outlive the profile.
CountingAllocator& Counter() {
  static auto* counter = new CountingAllocator();
  return *counter;
}

void CountingAllocator::Delete(void* p) {
  CountingAllocator& c = Counter();
  Entry entry{0, nullptr};
  {
    std::lock_guard<std::mutex> lock(c.mu_);
    auto it = c.sizes_.find(p);
    if (it != c.sizes_.end()) {
      entry = it->second;
      c.sizes_.erase(it);
    }
  }
  c.live_.fetch_sub(entry.bytes);
  if (entry.deleter != nullptr) entry.deleter(p);
}

constexpr uint8_t kAllocatorPriority = 100;

// Installs the counting allocator for its lifetime.
class CountingScope {
 public:
  CountingScope() : previous_(c10::GetCPUAllocator()) {
    if (previous_ != &Counter() && Counter().can_wrap(previous_)) {
      installed_ = true;
      Counter().set_base(previous_);
      c10::SetCPUAllocator(&Counter(), kAllocatorPriority);
    }
  }
  ~CountingScope() {
    if (installed_) c10::SetCPUAllocator(previous_, kAllocatorPriority);
  }
  CountingScope(const CountingScope&) = delete;
  CountingScope& operator=(const CountingScope&) = delete;

 private:
  c10::Allocator* previous_;
  bool installed_ = false;
};

int64_t Bytes(const torch::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

std::vector<int64_t> PerSampleShape(const torch::Tensor& t) {
  std::vector<int64_t> s(t.sizes().begin(), t.sizes().end());
  if (!s.empty()) s.erase(s.begin());
  return s;
}

// A fresh leaf copy of `a` whose floating tensors require grad.
Activation Leaf(const Activation& a) {
  auto leaf = [](const torch::Tensor& t) {
    torch::Tensor c = t.detach();
    if (c.is_floating_point()) c.requires_grad_(true);
    return c;
  };
  Activation out;
  out.main = leaf(a.main);
  for (const auto& c : a.carry) out.carry.push_back(leaf(c));
  return out;
}

Activation Detached(const Activation& a) {
  Activation out;
  out.main = a.main.detach();
  for (const auto& c : a.carry) out.carry.push_back(c.detach());
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

class CpuProfileMeter final : public ProfileMeter {
 public:
  // The clock an emulated device with this many intra-op threads measures its
  // compute on (worker/runtime/emulated_device.h).
  explicit CpuProfileMeter(bool count_memory) : clock_(CpuClockFor(torch::get_num_threads())) {
    if (count_memory) counting_.emplace();
  }
  torch::Device device() const override { return torch::Device(torch::kCPU); }
  std::string clock_name() const override { return CpuClockName(clock_); }
  double Start() override {
    EvictCpuCaches();
    return CpuSeconds(clock_);
  }
  double ElapsedMs(double start) override { return (CpuSeconds(clock_) - start) * 1e3; }
  int64_t LiveBytes() override { return counting_ ? Counter().live() : 0; }
  int64_t PeakBytes() override { return counting_ ? Counter().peak() : 0; }
  void ResetPeak() override {
    if (counting_) Counter().ResetPeak();
  }

 private:
  CpuClock clock_;
  std::optional<CountingScope> counting_;
};

void Backward(const Activation& out) {
  std::vector<torch::Tensor> roots, grads;
  auto add = [&](const torch::Tensor& t) {
    if (t.defined() && t.requires_grad()) {
      roots.push_back(t);
      grads.push_back(torch::ones_like(t));
    }
  };
  add(out.main);
  for (const auto& c : out.carry) add(c);
  if (!roots.empty()) torch::autograd::backward(roots, grads);
}

}  // namespace

void EvictCpuCaches() {
  static std::vector<char> buffer(32 << 20);
  static char value = 0;
  std::fill(buffer.begin(), buffer.end(), ++value);
}

std::unique_ptr<ProfileMeter> MakeCpuProfileMeter(bool count_memory) {
  return std::make_unique<CpuProfileMeter>(count_memory);
}

Result<nlohmann::json> ProfileModel(LayeredModel& model, int64_t batch,
                                    const std::vector<int64_t>& in_shape, int repeats) {
  CpuProfileMeter meter(/*count_memory=*/true);
  return ProfileModel(meter, model, batch, in_shape, repeats);
}

Result<nlohmann::json> ProfileModel(ProfileMeter& meter, LayeredModel& model, int64_t batch,
                                    const std::vector<int64_t>& in_shape, int repeats) {
  if (batch < 1) return InvalidArgument("batch must be at least 1", "batch");
  if (repeats < 1) return InvalidArgument("repeats must be at least 1", "repeats");
  if (in_shape.empty() ||
      std::any_of(in_shape.begin(), in_shape.end(), [](int64_t d) { return d < 1; })) {
    return InvalidArgument("in_shape must be non-empty and positive", "in_shape");
  }
  const size_t n = model.num_layers();
  // Snapshot what profiling changes.
  std::vector<std::pair<std::string, torch::Tensor>> buffers = model.NamedBuffers(0, n);
  std::vector<torch::Tensor> saved;
  for (const auto& b : buffers) saved.push_back(b.second.detach().clone());
  std::vector<bool> was_training;
  for (size_t i = 0; i < n; ++i) was_training.push_back(model.layer(i).layer->is_training());

  nlohmann::json layers = nlohmann::json::array();
  // The whole model's time in each repeat: how far repeats disagree.
  std::vector<double> totals;
  Status status;
  try {
    model.SetTraining(true);
    std::vector<int64_t> shape = {batch};
    shape.insert(shape.end(), in_shape.begin(), in_shape.end());
    totals.assign(static_cast<size_t>(repeats), 0.0);
    Activation current;
    current.main = torch::randn(shape, torch::TensorOptions().device(meter.device()));
    for (size_t i = 0; i < n; ++i) {
      Layer& layer = *model.layer(i).layer;
      std::vector<double> fwd, bwd;
      int64_t kept = 0, transient = 0;
      Activation out;
      for (int r = 0; r <= repeats; ++r) {  // r == 0 is the warm-up
        out = Activation();                 // free the previous run's output before measuring
        Activation in = Leaf(current);
        const int64_t live_before = meter.LiveBytes();
        const double t0 = meter.Start();
        out = layer.Forward(std::move(in));
        const double f_ms = meter.ElapsedMs(t0);
        const int64_t live_after = meter.LiveBytes();
        meter.ResetPeak();
        const double t1 = meter.Start();
        Backward(out);
        const double b_ms = meter.ElapsedMs(t1);
        if (r == 0) continue;
        fwd.push_back(f_ms);
        bwd.push_back(b_ms);
        totals[static_cast<size_t>(r - 1)] += f_ms + b_ms;
        kept = std::max(kept, live_after - live_before);
        // Working memory of the backward above what the forward kept: gradients of
        // the output (made by Backward) and the input, temporaries.
        transient = std::max(transient, meter.PeakBytes() - live_after);
      }
      int64_t param_bytes = 0;
      for (const auto& p : layer.parameters()) param_bytes += Bytes(p);
      // Batch norms synchronise their statistics across data-parallel replicas: one
      // all-reduce in the forward and one in the backward each.
      int64_t batch_norms = 0;
      for (const auto& m : layer.modules(/*include_self=*/false)) {
        if (dynamic_cast<const SyncBatchNorm*>(m.get()) != nullptr) ++batch_norms;
      }
      int64_t out_bytes = Bytes(out.main);
      for (const auto& c : out.carry) out_bytes += Bytes(c);
      const std::vector<int64_t> per_sample_in = PerSampleShape(current.main);
      const double flops = layer.ForwardFlopsPerSample(per_sample_in);
      layers.push_back({{"name", model.layer(i).name},
                        {"fwd_ms", Median(fwd)},
                        {"bwd_ms", Median(bwd)},
                        {"fwd_flops", flops * static_cast<double>(batch)},
                        {"fwd_flops_per_sample", flops},
                        {"param_bytes", param_bytes},
                        {"activation_bytes_per_sample", kept / batch},
                        {"backward_transient_bytes_per_sample", transient / batch},
                        {"batch_norms", batch_norms},
                        {"output_bytes_per_sample", out_bytes / batch},
                        {"in_shape", per_sample_in},
                        {"out_shape", PerSampleShape(out.main)}});
      current = Detached(out);
    }
  } catch (const std::exception& e) {
    status =
        InvalidArgument(std::string("profiling ") + model.name() + ": " + e.what(), "in_shape");
  }
  // Restore running statistics, gradients and training flags.
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < buffers.size(); ++i) buffers[i].second.copy_(saved[i]);
  }
  for (const auto& p : model.NamedParameters(0, n)) {
    torch::Tensor t = p.second;
    t.mutable_grad() = torch::Tensor();
  }
  for (size_t i = 0; i < n; ++i) model.layer(i).layer->train(was_training[i]);
  if (!status.ok()) return status;
  // (slowest - fastest) / median of the repeats' whole-model times: a host that
  // was busy for part of the profile shows here (daemon/controller/profile_cache.h
  // measures such a profile again).
  double spread = 0;
  if (totals.size() >= 2) {
    const auto [lo, hi] = std::minmax_element(totals.begin(), totals.end());
    const double median = Median(totals);
    spread = median > 0 ? (*hi - *lo) / median : 0;
  }
  return nlohmann::json{{"model", model.name()},
                        {"device", meter.device().str()},
                        {"batch", batch},
                        {"in_shape", in_shape},
                        {"repeats", repeats},
                        {"repeat_spread", spread},
                        {"clock", meter.clock_name()},
                        {"layers", std::move(layers)}};
}

struct AllocationCounter::Scope {
  CountingScope counting;
};

AllocationCounter::AllocationCounter() : scope_(new Scope()) {}
AllocationCounter::~AllocationCounter() { delete scope_; }
int64_t AllocationCounter::live_bytes() const { return Counter().live(); }
int64_t AllocationCounter::peak_bytes() const { return Counter().peak(); }
void AllocationCounter::ResetPeak() { Counter().ResetPeak(); }

Result<nlohmann::json> WithFixedCosts(nlohmann::json profile,
                                      const std::vector<nlohmann::json>& smaller) {
  if (smaller.empty()) return InvalidArgument("no smaller batch to fit against", "fixed_batch");
  try {
    const double big_b = profile.at("batch").get<double>();
    double smallest = big_b;
    for (const nlohmann::json& small : smaller) {
      const double b = small.at("batch").get<double>();
      if (!(b >= 1 && b < big_b)) {
        return InvalidArgument("the second profile's batch must be smaller", "fixed_batch");
      }
      smallest = std::min(smallest, b);
    }
    nlohmann::json& layers = profile.at("layers");
    for (const nlohmann::json& small : smaller) {
      const nlohmann::json& other = small.at("layers");
      if (layers.size() != other.size()) {
        return InvalidArgument("profiles have different layers", "fixed_batch");
      }
      for (size_t i = 0; i < layers.size(); ++i) {
        if (layers[i].at("name") != other[i].at("name")) {
          return InvalidArgument("profiles have different layers", "fixed_batch");
        }
      }
    }
    for (size_t i = 0; i < layers.size(); ++i) {
      for (const char* key : {"fwd", "bwd"}) {
        const std::string ms_key = std::string(key) + "_ms";
        // Least squares of ms = fixed + slope x batch over every point.
        std::vector<std::pair<double, double>> points = {
            {big_b, layers[i].at(ms_key).get<double>()}};
        for (const nlohmann::json& small : smaller) {
          points.emplace_back(small.at("batch").get<double>(),
                              small.at("layers")[i].at(ms_key).get<double>());
        }
        double mean_b = 0, mean_t = 0;
        for (const auto& [b, t] : points) {
          mean_b += b;
          mean_t += t;
        }
        mean_b /= static_cast<double>(points.size());
        mean_t /= static_cast<double>(points.size());
        double cov = 0, var = 0;
        for (const auto& [b, t] : points) {
          cov += (b - mean_b) * (t - mean_t);
          var += (b - mean_b) * (b - mean_b);
        }
        const double slope = var > 0 ? cov / var : 0.0;
        const double fixed = mean_t - slope * mean_b;
        layers[i][std::string(key) + "_fixed_ms"] = std::clamp(fixed, 0.0, points.front().second);
      }
    }
    profile["fixed_batch"] = static_cast<int64_t>(smallest);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("malformed profile: ") + e.what(), "fixed_batch");
  }
  return profile;
}

std::vector<int64_t> FixedCostBatches(int64_t smallest, int64_t batch) {
  std::vector<int64_t> out = {smallest};
  const auto mid = static_cast<int64_t>(
      std::llround(std::sqrt(static_cast<double>(smallest) * static_cast<double>(batch))));
  if (mid > smallest && mid < batch) out.push_back(mid);
  return out;
}

}  // namespace tessera::worker
