// Collectives and GradReducer over real Gloo process groups: two ranks as two
// threads of this process, rendezvous through a TCPStore on a free port.
#include "worker/runtime/collectives.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>
#include <thread>

#include "tests/worker/runtime/process_util.h"
#include "worker/runtime/await_work.h"
#include "worker/runtime/grad_reducer.h"

namespace tessera::worker {
namespace {

using testing::FreeLoopbackPort;

// Runs body(rank, world) on two threads, each with its own connected World.
void RunTwoRanks(const std::function<void(int, World&)>& body) {
  const int port = FreeLoopbackPort();
  auto rank_main = [&](int rank) {
    DistEnv env;
    env.distributed = true;
    env.rank = rank;
    env.world_size = 2;
    env.master_addr = "127.0.0.1";
    env.master_port = port;
    ConnectOptions o;
    o.store_timeout = std::chrono::milliseconds(20'000);
    o.op_timeout = std::chrono::milliseconds(20'000);
    auto world = ConnectWorld(env, o);
    ASSERT_TRUE(world.ok()) << world.status().ToString();
    body(rank, **world);
  };
  std::thread t1(rank_main, 1);
  rank_main(0);
  t1.join();
}

TEST(CollectivesTest, AllReduceBroadcastSendRecvStore) {
  RunTwoRanks([](int rank, World& w) {
    Collectives& c = w.world();
    EXPECT_EQ(c.rank(), rank);
    EXPECT_EQ(c.size(), 2);
    auto t = torch::full({3}, static_cast<float>(rank + 1));
    ASSERT_TRUE(c.AllReduceSum({t}).ok());
    EXPECT_TRUE(torch::equal(t, torch::full({3}, 3.0f)));

    // Tensors of different sizes in one call (batch-norm sync sends three).
    std::vector<torch::Tensor> mixed{torch::full({4}, 1.0f), torch::full({1}, 2.0 * (rank + 1))};
    ASSERT_TRUE(c.AllReduceSum(mixed).ok());
    EXPECT_TRUE(torch::equal(mixed[0], torch::full({4}, 2.0f)));
    EXPECT_EQ(mixed[1].item<double>(), 6.0);

    auto b = torch::full({2}, rank == 0 ? 7.0f : 0.0f);
    ASSERT_TRUE(c.Broadcast({b}, 0).ok());
    EXPECT_TRUE(torch::equal(b, torch::full({2}, 7.0f)));

    if (rank == 0) {
      auto work = c.SendAsync({torch::arange(4, torch::kFloat32)}, 1, 5);
      ASSERT_TRUE(work->Wait().ok());
      ASSERT_TRUE(c.StoreSet("k", "v0").ok());
    } else {
      auto r = torch::zeros({4});
      ASSERT_TRUE(c.Recv({r}, 0, 5).ok());
      EXPECT_TRUE(torch::equal(r, torch::arange(4, torch::kFloat32)));
      auto v = c.StoreGet("k");
      ASSERT_TRUE(v.ok());
      EXPECT_EQ(*v, "v0");
    }
    ASSERT_TRUE(c.Barrier().ok());
  });
}

TEST(CollectivesTest, SubGroupAndSingletonGroup) {
  RunTwoRanks([](int rank, World& w) {
    auto g = w.NewGroup("pair", {1, 0});  // group rank 0 is world rank 1
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ((*g)->rank(), rank == 1 ? 0 : 1);
    auto b = torch::full({1}, static_cast<float>(rank));
    ASSERT_TRUE((*g)->Broadcast({b}, 0).ok());
    EXPECT_EQ(b.item<float>(), 1.0f);
    auto solo = w.NewGroup("solo-" + std::to_string(rank), {rank});
    ASSERT_TRUE(solo.ok());
    EXPECT_EQ((*solo)->size(), 1);
    EXPECT_FALSE(w.NewGroup("not-member", {1 - rank}).ok());
  });
}

// A group destroyed after a peer loss is abandoned: rank 0's all-reduce waits
// for rank 1, which never joins it, and destroying the group returns at once
// instead of waiting out the operation's timeout (20 s).
TEST(CollectivesTest, AGroupDestroyedAfterAPeerLossIsAbandonedNotWaitedFor) {
  std::promise<void> destroyed;
  std::shared_future<void> rank0_done = destroyed.get_future().share();
  RunTwoRanks([&](int rank, World& w) {
    auto g = w.NewGroup("lost", {0, 1});
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    if (rank == 1) {
      // Keeps its end open, so rank 0's operation cannot fail fast.
      rank0_done.wait_for(std::chrono::seconds(60));
      return;
    }
    std::unique_ptr<CommWork> pending = (*g)->AllReduceSumAsync({torch::ones({4})});
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // under way
    MarkPeerLost("");
    pending.reset();
    const auto start = std::chrono::steady_clock::now();
    g->reset();
    const auto took = std::chrono::steady_clock::now() - start;
    ClearPeerLost();
    destroyed.set_value();
    EXPECT_LT(took, std::chrono::seconds(10));
  });
}

// The reducer's result is the sum over ranks of the gradients each rank
// accumulated over two backward passes (only the second armed), whatever the
// bucket size.
TEST(GradReducerTest, BucketedSumMatchesManualSum) {
  for (size_t bucket_bytes : {size_t{64}, size_t{1} << 20}) {
    RunTwoRanks([bucket_bytes](int rank, World& w) {
      // Both ranks are threads sharing torch's global generator: initialise
      // the parameters without it.
      torch::nn::Linear a(4, 8), b(8, 2);
      {
        torch::NoGradGuard no_grad;
        for (auto& p : {a->weight, a->bias, b->weight, b->bias}) {
          p.copy_(torch::sin(torch::arange(p.numel(), torch::kFloat32)).reshape(p.sizes()));
        }
      }
      auto loss_of = [&](int r, int mb) {
        auto x = torch::full({3, 4}, 0.1f * static_cast<float>(1 + r + 2 * mb));
        return b->forward(torch::tanh(a->forward(x))).pow(2).sum();
      };
      // Expected: sum over both ranks and micro-batches, computed locally.
      std::vector<torch::Tensor> params{a->weight, a->bias, b->weight, b->bias};
      for (int r = 0; r < 2; ++r) {
        for (int mb = 0; mb < 2; ++mb) loss_of(r, mb).backward();
      }
      std::vector<torch::Tensor> expected;
      for (auto& p : params) {
        expected.push_back(p.grad().clone());
        p.mutable_grad().zero_();
      }
      GradReducer reducer;
      reducer.AddGroup(&w.world(),
                       {{"a.weight", a->weight},
                        {"a.bias", a->bias},
                        {"b.weight", b->weight},
                        {"b.bias", b->bias}},
                       bucket_bytes);
      if (bucket_bytes == 64) {
        EXPECT_GE(reducer.num_buckets(), 2u);
      }
      loss_of(rank, 0).backward();
      reducer.Arm();
      loss_of(rank, 1).backward();
      double waited = 0;
      ASSERT_TRUE(reducer.Finish(&waited).ok());
      for (size_t i = 0; i < params.size(); ++i) {
        EXPECT_TRUE(torch::allclose(params[i].grad(), expected[i], 1e-5, 1e-6))
            << "param " << i << " rank " << rank;
      }
    });
  }
}

}  // namespace
}  // namespace tessera::worker
