#include "worker/runtime/batch_norm_sync.h"

#include <stdexcept>

namespace tessera::worker {

void CollectivesBatchNormSync::AllReduceSum(std::vector<torch::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  if (tensors.empty()) return;
  // One all-reduce for the whole set (sum, sum of squares, count): each collective
  // costs the ring's latency, and a batch norm calls this twice per micro-batch.
  bool one_dtype = true;
  for (const auto& t : tensors) one_dtype &= t.scalar_type() == tensors[0].scalar_type();
  std::vector<torch::Tensor> flat;
  if (one_dtype) {
    std::vector<torch::Tensor> parts;
    for (const auto& t : tensors) parts.push_back(t.reshape({-1}));
    flat.push_back(torch::cat(parts));
  } else {
    for (const auto& t : tensors) flat.push_back(t.contiguous());
  }
  Status s = comm_->AllReduceSum(flat);
  if (!s.ok()) throw std::runtime_error("batch-norm sync: " + s.ToString());
  if (one_dtype) {
    int64_t offset = 0;
    for (auto& t : tensors) {
      const int64_t n = t.numel();
      t.copy_(flat[0].narrow(0, offset, n).view(t.sizes()));
      offset += n;
    }
    return;
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!flat[i].is_same(tensors[i])) tensors[i].copy_(flat[i]);
  }
}

}  // namespace tessera::worker
