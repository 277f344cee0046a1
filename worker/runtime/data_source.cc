#include "worker/runtime/data_source.h"

#include <ATen/CPUGeneratorImpl.h>

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

}  // namespace tessera::worker
