// StepTrace: the steps asked for are recorded, each with the trainer's scopes,
// into a Chrome trace file; bad bounds name their flag.
#include "worker/runtime/step_trace.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/common/temp_dir.h"

namespace tessera::worker {
namespace {

TEST(StepTraceTest, RecordsTheStepsAskedForWithTheirScopes) {
  ::tessera::testing::TempDir dir;
  const std::string path = (dir.path() / "sub" / "trace.json").string();
  auto trace = StepTrace::Make({path, /*first_step=*/2, /*steps=*/2}, torch::Device(torch::kCPU));
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  torch::Tensor x = torch::rand({16, 16});
  for (int64_t step = 1; step <= 4; ++step) {
    trace->BeforeStep(step);
    TraceScope scope(kStepScope);
    {
      TraceScope phase(kOptimizerScope);
      x = torch::mm(x, x).tanh();
    }
    scope.End();
    ASSERT_TRUE(trace->AfterStep(step).ok());
  }
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(j.is_object());
  int steps = 0, phases = 0;
  for (const auto& e : j.value("traceEvents", nlohmann::json::array())) {
    if (e.value("cat", "") != "user_annotation") continue;
    steps += e.value("name", "") == kStepScope;
    phases += e.value("name", "") == kOptimizerScope;
  }
  EXPECT_EQ(steps, 2) << "steps 2 and 3 only";
  EXPECT_EQ(phases, 2);
}

TEST(StepTraceTest, ARunThatEndsBeforeTheLastTracedStepIsWrittenByFinish) {
  ::tessera::testing::TempDir dir;
  const std::string path = (dir.path() / "trace.json").string();
  auto trace = StepTrace::Make({path, /*first_step=*/1, /*steps=*/10}, torch::Device(torch::kCPU));
  ASSERT_TRUE(trace.ok());
  trace->BeforeStep(1);
  {
    TraceScope scope(kStepScope);
    (void)torch::mm(torch::rand({8, 8}), torch::rand({8, 8}));
  }
  ASSERT_TRUE(trace->AfterStep(1).ok());
  EXPECT_FALSE(std::filesystem::exists(path)) << "still recording";
  ASSERT_TRUE(trace->Finish().ok());
  EXPECT_TRUE(std::filesystem::exists(path));
}

TEST(StepTraceTest, NoPathRecordsNothingAndBadBoundsNameTheirFlag) {
  auto off = StepTrace::Make({"", 0, 0}, torch::Device(torch::kCPU));
  ASSERT_TRUE(off.ok());
  off->BeforeStep(1);
  EXPECT_TRUE(off->AfterStep(1).ok());
  EXPECT_EQ(StepTrace::Make({"t.json", 0, 5}, torch::Device(torch::kCPU)).status().field(),
            "trace-from");
  EXPECT_EQ(StepTrace::Make({"t.json", 1, 0}, torch::Device(torch::kCPU)).status().field(),
            "trace-steps");
}

}  // namespace
}  // namespace tessera::worker
