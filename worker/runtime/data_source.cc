#include "worker/runtime/data_source.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "worker/runtime/emulated_memory.h"
namespace tessera::worker {
namespace {

class SyntheticSource : public BatchSource {
 public:
  SyntheticSource(int64_t features, int64_t outputs, uint64_t seed)
      : features_(features), seed_(seed) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed * 7919 + 17);
    teacher_ = torch::randn({features, outputs}, gen) / std::sqrt(static_cast<double>(features));
  }
  Result<SampleBatch> Load(int64_t first_id, int64_t count) override {
    std::vector<torch::Tensor> xs;
    xs.reserve(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(seed_ * 1000003ULL +
                                                          static_cast<uint64_t>(first_id + i));
      xs.push_back(torch::randn({features_}, gen));
    }
    SampleBatch b;
    b.input = torch::stack(xs);
    b.target = torch::sin(b.input.matmul(teacher_) * 2.0);
    return b;
  }

 private:
  int64_t features_;
  uint64_t seed_;
  torch::Tensor teacher_;
};

}  // namespace

std::unique_ptr<BatchSource> MakeSyntheticSource(int64_t features, int64_t outputs, uint64_t seed) {
  return std::make_unique<SyntheticSource>(features, outputs, seed);
}

namespace {

class PrefetchingSource : public BatchSource {
 public:
  PrefetchingSource(std::unique_ptr<BatchSource> inner, int64_t stride)
      : inner_(std::move(inner)), stride_(stride) {}
  ~PrefetchingSource() override {
    for (auto& [key, pending] : pending_) pending.wait();
  }

  Result<SampleBatch> Load(int64_t first_id, int64_t count) override {
    const std::pair<int64_t, int64_t> key{first_id, count};
    std::optional<Result<SampleBatch>> batch;
    if (auto it = pending_.find(key); it != pending_.end()) {
      batch.emplace(it->second.get());
      pending_.erase(it);
    } else {
      batch.emplace(LoadLocked(first_id, count));
    }
    // Requests that will never come (a changed batch split) are dropped.
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->first.first < first_id) {
        it->second.wait();
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
    const std::pair<int64_t, int64_t> next{first_id + stride_, count};
    if (stride_ > 0 && pending_.size() < kMaxPending && !pending_.contains(next)) {
      pending_.emplace(next, std::async(std::launch::async, [this, next] {
                         return LoadLocked(next.first, next.second);
                       }));
    }
    return *std::move(batch);
  }

 private:
  static constexpr size_t kMaxPending = 16;

  Result<SampleBatch> LoadLocked(int64_t first_id, int64_t count) {
    std::lock_guard lock(mu_);
    try {
      return inner_->Load(first_id, count);
    } catch (const std::exception& e) {
      // Samples land in device memory too: out of it is resource_exhausted.
      return ComputeFailure("loading samples failed", e);
    }
  }

  std::unique_ptr<BatchSource> inner_;
  const int64_t stride_;
  std::mutex mu_;  // one load of inner_ at a time
  std::map<std::pair<int64_t, int64_t>, std::future<Result<SampleBatch>>> pending_;
};

}  // namespace

int LoaderThreads(int requested, const torch::Device& device, int local_world_size,
                  unsigned hardware_threads) {
  if (requested > 0) return requested;
  if (!device.is_cuda()) return 1;
  constexpr int kMaxLoaderThreads = 16;
  const int per_rank =
      static_cast<int>(std::max(hardware_threads, 1U)) / std::max(local_world_size, 1);
  // One of the rank's threads launches its GPU work.
  return std::clamp(per_rank - 1, 1, kMaxLoaderThreads);
}

std::unique_ptr<BatchSource> MakePrefetchingSource(std::unique_ptr<BatchSource> inner,
                                                   int64_t stride) {
  return std::make_unique<PrefetchingSource>(std::move(inner), stride);
}

}  // namespace tessera::worker
