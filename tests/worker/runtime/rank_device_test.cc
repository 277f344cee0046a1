// ResolveRankDevice: which device a rank takes from TESSERA_DEVICE, LOCAL_RANK
// and the number of GPUs CUDA sees (a table over fake device counts), and
// SelectRankDevice on this machine, which has no GPU.
#include "worker/runtime/rank_device.h"

#include <gtest/gtest.h>

#include <string>

namespace tessera::worker {
namespace {

struct Row {
  const char* name;
  std::string device;
  int local_rank;
  int visible_gpus;
  StatusCode code;      // kOk: resolved
  bool cuda;            // when resolved
  int index;            // when resolved
  std::string message;  // a part of the error message
};

class ResolveRankDeviceTest : public ::testing::TestWithParam<Row> {};

TEST_P(ResolveRankDeviceTest, Resolves) {
  const Row& row = GetParam();
  auto got = ResolveRankDevice(row.device, row.local_rank, row.visible_gpus, "GPU-a,GPU-b");
  if (row.code == StatusCode::kOk) {
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->cuda, row.cuda);
    EXPECT_EQ(got->index, row.index);
  } else {
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), row.code) << got.status().ToString();
    EXPECT_EQ(got.status().field(), "TESSERA_DEVICE");
    EXPECT_NE(got.status().message().find(row.message), std::string::npos)
        << got.status().message();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, ResolveRankDeviceTest,
    ::testing::Values(
        Row{"cpu", "cpu", 3, 0, StatusCode::kOk, false, -1, ""},
        Row{"empty_is_cpu", "", 0, 4, StatusCode::kOk, false, -1, ""},
        Row{"cpu_index", "cpu:0", 1, 0, StatusCode::kOk, false, -1, ""},
        Row{"explicit_first", "cuda:0", 2, 4, StatusCode::kOk, true, 0, ""},
        // The agent numbers a rank's GPU within its CUDA_VISIBLE_DEVICES; LOCAL_RANK
        // does not override an explicit index.
        Row{"explicit_third", "cuda:2", 0, 4, StatusCode::kOk, true, 2, ""},
        Row{"bare_cuda_takes_local_rank", "cuda", 3, 4, StatusCode::kOk, true, 3, ""},
        Row{"bare_cuda_rank0", "cuda", 0, 1, StatusCode::kOk, true, 0, ""},
        Row{"local_rank_past_count", "cuda", 2, 2, StatusCode::kFailedPrecondition, false, -1,
            "cuda:LOCAL_RANK = cuda:2 asked for, but CUDA sees 2 GPU(s) (CUDA_VISIBLE_DEVICES="},
        Row{"index_past_count", "cuda:4", 0, 4, StatusCode::kFailedPrecondition, false, -1,
            "CUDA sees 4 GPU(s)"},
        Row{"no_gpu", "cuda:0", 0, 0, StatusCode::kFailedPrecondition, false, -1,
            "CUDA sees no GPU"},
        Row{"bad_index", "cuda:x", 0, 4, StatusCode::kInvalidArgument, false, -1, "bad device"},
        Row{"negative_index", "cuda:-1", 0, 4, StatusCode::kInvalidArgument, false, -1,
            "bad device"},
        Row{"trailing_text", "cuda:1a", 0, 4, StatusCode::kInvalidArgument, false, -1,
            "bad device"},
        Row{"unknown_kind", "mps", 0, 4, StatusCode::kInvalidArgument, false, -1,
            "unknown device"}),
    [](const ::testing::TestParamInfo<Row>& info) { return std::string(info.param.name); });

TEST(SelectRankDeviceTest, CpuIsTheCpu) {
  auto got = SelectRankDevice("cpu", 0);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->is_cpu());
}

TEST(SelectRankDeviceTest, AGpuThisMachineLacksIsAClearError) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "this machine has a GPU";
  auto got = SelectRankDevice("cuda:0", 0);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(got.status().message().find("CUDA sees no GPU"), std::string::npos)
      << got.status().message();
}

}  // namespace
}  // namespace tessera::worker
