#include "daemon/failure_detector.h"

#include <gtest/gtest.h>

namespace tessera::daemon {
namespace {

TEST(FailureDetectorTest, ClassifiesBySilence) {
  FailureDetectorOptions o{
      .heartbeat_interval_ms = 1000, .suspect_after_missed = 2, .dead_after_ms = 3000};
  struct Row {
    int64_t silence_ms;
    NodeHealth want;
  };
  const Row rows[] = {
      {0, NodeHealth::kHealthy},    {999, NodeHealth::kHealthy},  {2000, NodeHealth::kHealthy},
      {2001, NodeHealth::kSuspect}, {3000, NodeHealth::kSuspect}, {3001, NodeHealth::kDead},
      {60'000, NodeHealth::kDead},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(ClassifyNode(r.silence_ms, o), r.want) << r.silence_ms;
  }
  EXPECT_EQ(NodeHealthName(NodeHealth::kSuspect), "suspect");
}

}  // namespace
}  // namespace tessera::daemon
