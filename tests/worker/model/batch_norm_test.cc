#include "worker/model/batch_norm.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "worker/model/layered_model.h"

namespace tessera::worker {
namespace {

// An in-process all-reduce among `size` replicas, each on its own thread:
// every AllReduceSum call waits for the matching call of every replica and
// returns the element-wise sum. Counts calls so tests can check the sequence.
class InProcessGroup {
 public:
  explicit InProcessGroup(int size) : size_(size) {}

  void AllReduceSum(std::vector<torch::Tensor>& tensors) {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t round = round_;
    if (arrived_ == 0) {
      sum_.clear();
      for (const auto& t : tensors) sum_.push_back(t.detach().clone());
    } else {
      if (sum_.size() != tensors.size()) throw std::runtime_error("mismatched all-reduce");
      for (size_t i = 0; i < tensors.size(); ++i) sum_[i] += tensors[i].detach();
    }
    ++calls_;
    if (++arrived_ == size_) {
      result_ = sum_;
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
    } else if (!cv_.wait_for(lock, std::chrono::seconds(20), [&] { return round_ != round; })) {
      throw std::runtime_error("all-reduce timed out: replicas disagree on the call sequence");
    }
    for (size_t i = 0; i < tensors.size(); ++i) tensors[i].copy_(result_[i]);
  }
  int64_t calls() const { return calls_; }

 private:
  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  int64_t round_ = 0;
  int64_t calls_ = 0;
  std::vector<torch::Tensor> sum_, result_;
};

// reduce_backward = false skips the gradient all-reduce (the second call of
// each step): a negative control showing that the backward collective matters.
class GroupSync : public BatchNormSync {
 public:
  GroupSync(InProcessGroup* group, bool reduce_backward)
      : group_(group), reduce_backward_(reduce_backward) {}
  void AllReduceSum(std::vector<torch::Tensor>& tensors) override {
    if (!reduce_backward_ && calls_++ % 2 == 1) return;
    group_->AllReduceSum(tensors);
  }

 private:
  InProcessGroup* group_;
  bool reduce_backward_;
  int calls_ = 0;
};

struct ReplicaResult {
  torch::Tensor y, dx, dweight, dbias, running_mean, running_var;
};

// One training step of `bn` on x with loss sum(y * w).
ReplicaResult Step(SyncBatchNorm& bn, const torch::Tensor& x_in, const torch::Tensor& w,
                   BatchNormSync* sync) {
  torch::Tensor x = x_in.clone().requires_grad_(true);
  torch::Tensor y = bn.Forward(x, sync);
  (y * w).sum().backward();
  auto params = bn.named_parameters();
  auto buffers = bn.named_buffers();
  return {y.detach(),
          x.grad(),
          params["weight"].grad().clone(),
          params["bias"].grad().clone(),
          buffers["running_mean"].clone(),
          buffers["running_var"].clone()};
}

// Non-trivial affine parameters without the (global, shared) torch RNG.
void Randomize(SyncBatchNorm& bn) {
  torch::NoGradGuard g;
  auto params = bn.named_parameters();
  const int64_t c = bn.channels();
  params["weight"].copy_(torch::arange(c, torch::kFloat) * 0.3 + 0.5);
  params["bias"].copy_(torch::arange(c, torch::kFloat) * 0.2 - 0.1);
}

struct SplitCase {
  std::vector<int64_t> shares;
};

// One training step per replica, each on its own thread with its slice of x.
std::vector<ReplicaResult> RunReplicas(const torch::Tensor& x, const torch::Tensor& w,
                                       const std::vector<int64_t>& shares, InProcessGroup* group,
                                       bool reduce_backward) {
  std::vector<ReplicaResult> got(shares.size());
  std::vector<std::exception_ptr> errors(shares.size());
  std::vector<std::thread> threads;
  int64_t offset = 0;
  for (size_t r = 0; r < shares.size(); ++r) {
    const int64_t begin = offset, n = shares[r];
    offset += n;
    threads.emplace_back([&, r, begin, n] {
      try {
        SyncBatchNorm bn(x.size(1));
        Randomize(bn);
        bn.train();
        GroupSync sync(group, reduce_backward);
        got[r] = Step(bn, x.narrow(0, begin, n), w.narrow(0, begin, n), &sync);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return got;
}

class SyncBatchNormTest : public ::testing::TestWithParam<SplitCase> {};

// SyncBatchNorm over replicas == single-process batch norm over the union.
TEST_P(SyncBatchNormTest, MatchesBatchNormOnTheFullBatch) {
  const std::vector<int64_t>& shares = GetParam().shares;
  int64_t total = 0;
  for (int64_t s : shares) total += s;
  torch::manual_seed(11);
  const int64_t c = 3;
  const torch::Tensor x = torch::randn({total, c, 5, 4}) * 2 + 0.7;
  const torch::Tensor w = torch::randn({total, c, 5, 4});

  SyncBatchNorm full(c);
  Randomize(full);
  full.train();
  ReplicaResult want = Step(full, x, w, nullptr);  // native batch norm

  InProcessGroup group(static_cast<int>(shares.size()));
  const std::vector<ReplicaResult> got = RunReplicas(x, w, shares, &group, true);
  // One forward and one backward collective per replica.
  EXPECT_EQ(group.calls(), 2 * static_cast<int64_t>(shares.size()));

  std::vector<torch::Tensor> ys, dxs;
  torch::Tensor dweight = torch::zeros({c}), dbias = torch::zeros({c});
  for (const auto& g : got) {
    ys.push_back(g.y);
    dxs.push_back(g.dx);
    dweight += g.dweight;  // data parallel sums the replicas' parameter gradients
    dbias += g.dbias;
    EXPECT_TRUE(torch::allclose(g.running_mean, want.running_mean, 1e-5, 1e-5));
    EXPECT_TRUE(torch::allclose(g.running_var, want.running_var, 1e-5, 1e-5));
  }
  EXPECT_LT((torch::cat(ys) - want.y).abs().max().item<double>(), 1e-5);
  EXPECT_LT((torch::cat(dxs) - want.dx).abs().max().item<double>(), 1e-5);
  EXPECT_LT((dweight - want.dweight).abs().max().item<double>(), 1e-4);
  EXPECT_LT((dbias - want.dbias).abs().max().item<double>(), 1e-4);
}

// Negative control: with the forward all-reduce only, outputs still match but
// input gradients do not (the cross-replica terms of d mean / d var are lost).
TEST(SyncBatchNormBackwardTest, GradientsNeedTheBackwardAllReduce) {
  torch::manual_seed(13);
  const torch::Tensor x = torch::randn({6, 2, 3, 3}) + 0.5;
  const torch::Tensor w = torch::randn({6, 2, 3, 3});
  SyncBatchNorm full(2);
  Randomize(full);
  full.train();
  const ReplicaResult want = Step(full, x, w, nullptr);
  InProcessGroup group(2);
  const auto got = RunReplicas(x, w, {3, 3}, &group, /*reduce_backward=*/false);
  EXPECT_LT((torch::cat({got[0].y, got[1].y}) - want.y).abs().max().item<double>(), 1e-5);
  EXPECT_GT((torch::cat({got[0].dx, got[1].dx}) - want.dx).abs().max().item<double>(), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Splits, SyncBatchNormTest,
                         ::testing::Values(SplitCase{{4, 4}}, SplitCase{{6, 2}},
                                           SplitCase{{3, 1, 2}}));

// Without the all-reduce each replica would normalise with its own statistics:
// the halves' outputs then differ from full-batch batch norm.
TEST(SyncBatchNormLocalTest, LocalStatisticsDifferFromGlobal) {
  torch::manual_seed(12);
  const torch::Tensor x = torch::cat({torch::randn({2, 2, 4, 4}), torch::randn({2, 2, 4, 4}) + 3});
  SyncBatchNorm full(2), half(2);
  full.train();
  half.train();
  const torch::Tensor y_full = full.Forward(x, nullptr);
  const torch::Tensor y_half = half.Forward(x.narrow(0, 0, 2), nullptr);
  EXPECT_GT((y_full.narrow(0, 0, 2) - y_half).abs().max().item<double>(), 0.1);
}

TEST(SyncBatchNormLocalTest, EvalUsesRunningStatisticsAndNoCollective) {
  InProcessGroup group(1);
  GroupSync sync(&group, true);
  SyncBatchNorm bn(2);
  bn.eval();
  const torch::Tensor x = torch::randn({2, 2, 3, 3});
  // Fresh running stats (mean 0, var 1): eval is the identity up to eps.
  EXPECT_TRUE(torch::allclose(bn.Forward(x, &sync), x, 1e-4, 1e-4));
  EXPECT_EQ(group.calls(), 0);
}

// A single replica: the all-reduce is the identity, so results equal local
// batch norm, and every batch-norm layer of a model calls the sync once in
// forward and once in backward.
class CountingSync : public BatchNormSync {
 public:
  void AllReduceSum(std::vector<torch::Tensor>& tensors) override {
    ASSERT_EQ(tensors.size(), 3u);
    ++calls;
  }
  int calls = 0;
};

TEST(SyncBatchNormModelTest, ModelInstallsTheSyncInEveryBatchNorm) {
  for (const std::string name : {"colorize-unet", "denoiser-dncnn", "classifier-resnet"}) {
    SCOPED_TRACE(name);
    ModelConfig cfg;
    cfg.width = 8;
    cfg.image_size = 16;
    auto synced = MakeModel(name, cfg);
    auto local = MakeModel(name, cfg);
    ASSERT_TRUE(synced.ok() && local.ok());
    int bn_count = 0;
    for (const auto& [n, t] : (*synced)->NamedBuffers(0, (*synced)->num_layers())) {
      if (n.find("running_mean") != std::string::npos) ++bn_count;
    }
    ASSERT_GT(bn_count, 0);
    auto sync = std::make_shared<CountingSync>();
    (*synced)->SetBatchNormSync(sync);
    (*synced)->SetTraining(true);
    (*local)->SetTraining(true);
    const int64_t c = name == "colorize-unet" ? 1 : 3;
    torch::manual_seed(1);
    const torch::Tensor x = torch::randn({2, c, 16, 16});
    Activation a = (*synced)->Forward({x, {}}, 0, (*synced)->num_layers());
    EXPECT_EQ(sync->calls, bn_count);
    Activation b = (*local)->Forward({x, {}}, 0, (*local)->num_layers());
    EXPECT_LT((a.main - b.main).abs().max().item<double>(), 1e-4);
    a.main.sum().backward();
    EXPECT_EQ(sync->calls, 2 * bn_count);
  }
}

}  // namespace
}  // namespace tessera::worker
