#include "daemon/controller/job_controller_util.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tessera::daemon {
namespace {

// The event text of an infer attempt's ranks giving devices up (the share
// round's shrink and inference yielding to training both say it).
TEST(RanksGiveTest, Table) {
  const struct {
    std::vector<int64_t> ranks;
    std::vector<std::string> devices;
    std::string give;
    std::string chunks;
  } cases[] = {
      {{2}, {"boxc:0"}, "rank 2 gives boxc:0", "the chunks it held went back to the queue"},
      {{1, 3},
       {"boxa:1", "boxc:0"},
       "ranks 1,3 give boxa:1, boxc:0",
       "the chunks they held went back to the queue"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(RanksGive(c.ranks, c.devices), c.give);
    EXPECT_EQ(ChunksBackToQueue(c.ranks), c.chunks);
  }
}

}  // namespace
}  // namespace tessera::daemon
