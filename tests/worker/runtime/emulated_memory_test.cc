// EmulatedMemory: a rank's CPU tensors are counted and may not exceed the
// emulated device's declared memory; past it LibTorch throws what a CUDA
// out-of-memory throws.
#include "worker/runtime/emulated_memory.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <thread>

namespace tessera::worker {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(EmulatedMemoryTest, CountsTensorsAndFailsLikeAGpuPastTheLimit) {
  EmulatedMemory::Install(64 * kMiB);
  ASSERT_TRUE(EmulatedMemory::installed());
  const int64_t base = EmulatedMemory::in_use_bytes();
  EmulatedMemory::ResetPeak();
  {
    torch::Tensor a = torch::ones({4 * kMiB}, torch::kFloat32);  // 16 MiB
    EXPECT_GE(EmulatedMemory::in_use_bytes() - base, 16 * kMiB);
    EXPECT_LT(EmulatedMemory::in_use_bytes() - base, 17 * kMiB);
    torch::Tensor b = a * 2;  // another 16 MiB
    EXPECT_GE(EmulatedMemory::peak_bytes() - base, 32 * kMiB);
    bool threw = false;
    try {
      torch::Tensor c = torch::empty({16 * kMiB}, torch::kFloat32);  // 64 MiB more
    } catch (const c10::OutOfMemoryError& e) {
      threw = true;
      const std::string what = e.what_without_backtrace();
      EXPECT_NE(what.find("emulated device out of memory"), std::string::npos) << what;
      EXPECT_NE(what.find("64.0 MiB"), std::string::npos) << what;
      const Status s = ComputeFailure("step 3 failed", e);
      EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
      EXPECT_EQ(s.message().rfind("step 3 failed: emulated device out of memory", 0), 0u)
          << s.message();
    }
    EXPECT_TRUE(threw) << "96 MiB on a 64 MiB device must fail";
    EXPECT_LT(EmulatedMemory::in_use_bytes() - base, 33 * kMiB) << "the failed request is not held";
  }
  EXPECT_LT(EmulatedMemory::in_use_bytes() - base, kMiB) << "freed tensors are uncounted";
  EXPECT_GE(EmulatedMemory::peak_bytes() - base, 32 * kMiB) << "the peak stays";

  // Without a limit the allocator only counts.
  EmulatedMemory::Install(0);
  torch::Tensor big = torch::empty({32 * kMiB}, torch::kFloat32);  // 128 MiB
  EXPECT_GE(EmulatedMemory::peak_bytes() - base, 128 * kMiB);
}

// Tensors made inside a HostMemoryScope (images a pipeline thread reads or
// writes) are host memory: not counted, not limited, even when another
// thread frees them; a copy made outside the scope is device memory again.
TEST(EmulatedMemoryTest, HostScopeTensorsAreNotDeviceMemory) {
  EmulatedMemory::Install(8 * kMiB);
  const int64_t base = EmulatedMemory::in_use_bytes();
  torch::Tensor host;
  std::thread reader([&host] {
    const HostMemoryScope scope;
    host = torch::ones({4 * kMiB}, torch::kFloat32);  // 16 MiB on an 8 MiB device
  });
  reader.join();
  EXPECT_LT(EmulatedMemory::in_use_bytes() - base, kMiB);
  EXPECT_THROW(host.clone(), c10::OutOfMemoryError) << "the device-side copy counts";
  {
    const HostMemoryScope outer;
    const HostMemoryScope inner;
  }
  EXPECT_THROW(torch::empty({4 * kMiB}, torch::kFloat32), c10::OutOfMemoryError)
      << "scopes that ended leave the thread counted again";
  host = torch::Tensor();  // freed by this thread, not counted back
  EXPECT_LT(std::abs(EmulatedMemory::in_use_bytes() - base), kMiB);
  EmulatedMemory::Install(0);
}

TEST(EmulatedMemoryTest, OtherErrorsAreInternal) {
  const std::runtime_error e("boom");
  const Status s = ComputeFailure("forward", e);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "forward: boom");
}

}  // namespace
}  // namespace tessera::worker
