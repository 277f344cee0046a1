#include "daemon/controller/failure_detector.h"

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

TEST(FailureDetectorTest, PeerLossCheckKillsASilentNodeBeforeTheTimeout) {
  using std::chrono::milliseconds;
  const FailureDetectorOptions o{
      .heartbeat_interval_ms = 1000, .suspect_after_missed = 2, .dead_after_ms = 3000};
  ASSERT_EQ(CheckDeadAfterMs(o, 1000), 1600);
  const PeerLossChecks::TimePoint t0{};
  struct Row {
    const char* what;
    bool check;           // put under check at t0 + check_at_ms
    int64_t check_at_ms;  // when the check began
    int64_t seen_ms;      // last beat
    int64_t hold_ms;      // the hold the last beat asked for
    int64_t now_ms;
    NodeHealth want;
    bool still_under_check;
  };
  const Row rows[] = {
      {"no check: the plain timeout", false, 0, 0, 1000, 2500, NodeHealth::kSuspect, false},
      {"under check, silent past 1.6 intervals", true, 500, 0, 1000, 1601, NodeHealth::kDead, true},
      {"under check, not yet silent long enough", true, 500, 0, 1000, 1600, NodeHealth::kHealthy,
       true},
      {"a short hold: silent past it and 0.6 intervals", true, 100, 0, 250, 851, NodeHealth::kDead,
       true},
      {"a short hold, not yet", true, 100, 0, 250, 850, NodeHealth::kHealthy, true},
      {"no hold: answered at once, 0.6 intervals", true, 100, 0, 0, 601, NodeHealth::kDead, true},
      {"a hold longer than an interval counts as one", true, 500, 0, 5000, 1601, NodeHealth::kDead,
       true},
      {"a beat after the check began ends it", true, 500, 900, 250, 2600, NodeHealth::kHealthy,
       false},
      {"the plain timeout ends the check", true, 500, 0, 1000, 3001, NodeHealth::kDead, false},
  };
  for (const Row& r : rows) {
    PeerLossChecks checks;
    if (r.check) checks.Begin("n", t0 + milliseconds(r.check_at_ms));
    EXPECT_EQ(checks.Classify("n", t0 + milliseconds(r.seen_ms), r.hold_ms,
                              t0 + milliseconds(r.now_ms), o),
              r.want)
        << r.what;
    EXPECT_EQ(checks.UnderCheck("n"), r.still_under_check) << r.what;
    EXPECT_FALSE(checks.UnderCheck("other")) << r.what;
  }
}

TEST(FailureDetectorTest, CheckWindowFollowsTheIntervalUnlessSet) {
  FailureDetectorOptions o{.heartbeat_interval_ms = 2000};
  EXPECT_EQ(CheckDeadAfterMs(o, 2000), 3200);
  EXPECT_EQ(CheckDeadAfterMs(o, 50), 1250);
  // A short interval: the hold plus at least kMinCheckReturnMs, however
  // small 0.6 intervals are (an agent answered at once on a loaded host).
  o.heartbeat_interval_ms = 200;
  EXPECT_EQ(CheckDeadAfterMs(o, 200), 200 + kMinCheckReturnMs);
  EXPECT_EQ(CheckDeadAfterMs(o, 0), kMinCheckReturnMs);
  EXPECT_EQ(CheckDeadAfterMs(o, 50), 50 + kMinCheckReturnMs);
  o.check_dead_after_ms = 700;
  EXPECT_EQ(CheckDeadAfterMs(o, 50), 700);
}

}  // namespace
}  // namespace tessera::daemon
