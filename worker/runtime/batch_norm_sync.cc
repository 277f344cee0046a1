#include "worker/runtime/batch_norm_sync.h"

#include <chrono>
#include <stdexcept>

namespace tessera::worker {

void CollectivesBatchNormSync::AllReduceSum(std::vector<torch::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<torch::Tensor> flat;
  for (auto& t : tensors) flat.push_back(t.contiguous());
  Status s = comm_->AllReduceSum(flat);
  if (!s.ok()) throw std::runtime_error("batch-norm sync: " + s.ToString());
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!flat[i].is_same(tensors[i])) tensors[i].copy_(flat[i]);
  }
  wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace tessera::worker
