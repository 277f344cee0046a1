// AwaitWork under NCCL's semantics, which a CPU can show with a c10d::Work whose
// wait() returns at once while the operation is still running (NCCL's wait only
// orders the CUDA stream): the rank must still wait for completion, and a peer
// that never answers must end in kUnavailable and the peer-lost mark.
#include "worker/runtime/await_work.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>

#include "worker/runtime/collectives.h"

namespace tessera::worker {
namespace {

using namespace std::chrono_literals;

// A c10d operation as NCCL reports it: wait() does not block the host.
class StreamOrderedWork : public c10d::Work {
 public:
  bool wait(std::chrono::milliseconds) override {
    ++waits;
    return true;
  }
  bool isCompleted() override { return done.load(); }
  std::exception_ptr exception() const override { return error; }

  std::atomic<bool> done{false};
  std::atomic<int> waits{0};
  std::exception_ptr error;
};

TEST(AwaitWorkTest, WaitsUntilAnOperationWhoseWaitReturnsAtOnceHasCompleted) {
  auto work = c10::make_intrusive<StreamOrderedWork>();
  std::atomic<bool> done_when_returned{false};
  std::thread finisher([&] {
    std::this_thread::sleep_for(100ms);
    work->done.store(true);
  });
  Status s = AwaitWork(*work, 10s, "allreduce");
  done_when_returned.store(work->done.load());
  finisher.join();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(work->waits.load(), 1);
  EXPECT_TRUE(done_when_returned.load()) << "returned while the operation was still running";
}

TEST(AwaitWorkTest, AFailedOperationIsUnavailableAndMarksThePeerLost) {
  auto work = c10::make_intrusive<StreamOrderedWork>();
  work->error =
      std::make_exception_ptr(std::runtime_error("NCCL error: remote process exited\nstack"));
  work->done.store(true);
  Status s = AwaitWork(*work, 10s, "broadcast");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "broadcast failed: NCCL error: remote process exited");
  EXPECT_TRUE(PeerLost());
}

// Last: the peer-lost mark is process-wide and cannot be cleared.
TEST(AwaitWorkTest, AnOperationThatNeverCompletesTimesOutAsAPeerLoss) {
  auto work = c10::make_intrusive<StreamOrderedWork>();
  const auto t0 = std::chrono::steady_clock::now();
  Status s = AwaitWork(*work, 300ms, "recv");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 300ms);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("recv did not complete within"), std::string::npos) << s.message();
  EXPECT_TRUE(PeerLost());
}

}  // namespace
}  // namespace tessera::worker
