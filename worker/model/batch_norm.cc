#include "worker/model/batch_norm.h"

#include <utility>
#include <vector>

namespace tessera::worker {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The pointer travels through the autograd context as an integer.
constexpr const char* kSyncKey = "bn_sync";

class AllReduceStatsFunction : public torch::autograd::Function<AllReduceStatsFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& sum,
                               const torch::Tensor& sqsum, const torch::Tensor& count,
                               BatchNormSync* sync) {
    ctx->saved_data[kSyncKey] = static_cast<int64_t>(reinterpret_cast<intptr_t>(sync));
    std::vector<torch::Tensor> stats = {sum.detach().clone(), sqsum.detach().clone(),
                                        count.detach().clone()};
    sync->AllReduceSum(stats);
    ctx->mark_non_differentiable({stats[2]});
    return {stats[0], stats[1], stats[2]};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* sync =
        reinterpret_cast<BatchNormSync*>(static_cast<intptr_t>(ctx->saved_data[kSyncKey].toInt()));
    // Undefined gradients (an output unused downstream) still take part in
    // the collective so every replica issues the same calls.
    std::vector<torch::Tensor> g(3);
    for (size_t i = 0; i < 3; ++i) {
      g[i] = grads[i].defined() ? grads[i].detach().clone() : torch::Tensor();
    }
    const torch::Tensor& like = g[0].defined() ? g[0] : g[1];
    if (!like.defined())
      return {torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    if (!g[0].defined()) g[0] = torch::zeros_like(like);
    if (!g[1].defined()) g[1] = torch::zeros_like(like);
    g[2] = torch::zeros({1}, like.options());
    sync->AllReduceSum(g);
    return {g[0], g[1], torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

std::vector<torch::Tensor> AllReduceBatchStats(const torch::Tensor& sum, const torch::Tensor& sqsum,
                                               const torch::Tensor& count, BatchNormSync* sync) {
  return AllReduceStatsFunction::apply(sum, sqsum, count, sync);
}

SyncBatchNorm::SyncBatchNorm(int64_t channels, double momentum, double eps)
    : channels_(channels), momentum_(momentum), eps_(eps) {
  weight_ = register_parameter("weight", torch::ones({channels}));
  bias_ = register_parameter("bias", torch::zeros({channels}));
  running_mean_ = register_buffer("running_mean", torch::zeros({channels}));
  running_var_ = register_buffer("running_var", torch::ones({channels}));
}

torch::Tensor SyncBatchNorm::Forward(const torch::Tensor& x, BatchNormSync* sync) {
  if (!is_training() || sync == nullptr) {
    return torch::batch_norm(x, weight_, bias_, running_mean_, running_var_, is_training(),
                             momentum_, eps_, /*cudnn_enabled=*/true);
  }
  std::vector<int64_t> reduce_dims = {0};
  for (int64_t d = 2; d < x.dim(); ++d) reduce_dims.push_back(d);
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[1] = channels_;

  const torch::Tensor local_sum = x.sum(reduce_dims);
  const torch::Tensor local_sqsum = (x * x).sum(reduce_dims);
  const torch::Tensor local_count =
      torch::full({1}, static_cast<double>(x.numel() / channels_), x.options());
  const std::vector<torch::Tensor> global =
      AllReduceBatchStats(local_sum, local_sqsum, local_count, sync);
  const torch::Tensor& count = global[2];
  const torch::Tensor mean = global[0] / count;
  const torch::Tensor var = torch::clamp_min(global[1] / count - mean * mean, 0.0);
  const torch::Tensor invstd = torch::rsqrt(var + eps_);

  {
    torch::NoGradGuard no_grad;
    const double n = count.item<double>();
    const torch::Tensor unbiased = n > 1 ? var.detach() * (n / (n - 1)) : var.detach();
    running_mean_.mul_(1 - momentum_).add_(mean.detach(), momentum_);
    running_var_.mul_(1 - momentum_).add_(unbiased, momentum_);
  }
  const torch::Tensor scale = (invstd * weight_).view(shape);
  return (x - mean.view(shape)) * scale + bias_.view(shape);
}

}  // namespace tessera::worker
