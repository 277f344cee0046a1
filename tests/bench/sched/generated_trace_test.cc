// The simulator's generated traces (bench/sched/trace.h): Gavel's
// Philly-shaped trace draws the published shapes (Poisson arrivals, lengths
// 10^x minutes in two classes, GPU counts 1/2/4/8), and replays on the demo
// lab under every policy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "bench/sched/clusters.h"
#include "bench/sched/run.h"
#include "bench/sched/sim_planner.h"
#include "bench/sched/trace.h"

namespace tessera::scheduler::sim {
namespace {

// One A100-like GPU: the device the trace's lengths are drawn for.
Cluster OneReferenceGpu() {
  Cluster c{"one-gpu", "1 A100-like", {}};
  Node n;
  n.name = "ref";
  Device d;
  d.type = "A100-like";
  d.memory_bytes = int64_t{80} << 30;
  d.tflops = 19.5;
  n.devices.push_back(d);
  c.snapshot.nodes.push_back(n);
  return c;
}

TEST(GeneratedTraceTest, PhillyTracesDrawThePublishedShapes) {
  constexpr int kJobs = 2000;
  constexpr double kRate = 3;  // an hour
  const Trace t = GeneratePhilly(/*seed=*/7, /*load=*/1, kJobs, kRate, /*users=*/5);
  ASSERT_EQ(t.jobs.size(), static_cast<size_t>(kJobs));
  // Arrivals: in order, a mean gap of 1/rate hours (Poisson), gaps spread as
  // an exponential's (its standard deviation equals its mean).
  double sum = 0, sum_sq = 0;
  for (size_t i = 1; i < t.jobs.size(); ++i) {
    const double gap = t.jobs[i].submit_s - t.jobs[i - 1].submit_s;
    ASSERT_GE(gap, 0);
    sum += gap;
    sum_sq += gap * gap;
  }
  const double mean = sum / (kJobs - 1);
  const double sd = std::sqrt(sum_sq / (kJobs - 1) - mean * mean);
  EXPECT_NEAR(mean, kHour / kRate, 0.1 * kHour / kRate);
  EXPECT_NEAR(sd / mean, 1.0, 0.1);
  // Sizes: 1, 2, 4, 8 devices for 70, 10, 15, 5 in 100; users drawn evenly.
  std::map<int64_t, int> sizes;
  std::set<std::string> users;
  for (const TraceJob& j : t.jobs) {
    ++sizes[j.max_devices];
    users.insert(j.user);
    EXPECT_EQ(j.min_devices, 1);
    EXPECT_EQ(j.kind, JobKind::kTrain);
  }
  EXPECT_EQ(sizes.size(), 4u);
  EXPECT_NEAR(sizes[1] / double{kJobs}, 0.70, 0.04);
  EXPECT_NEAR(sizes[2] / double{kJobs}, 0.10, 0.03);
  EXPECT_NEAR(sizes[4] / double{kJobs}, 0.15, 0.03);
  EXPECT_NEAR(sizes[8] / double{kJobs}, 0.05, 0.02);
  EXPECT_EQ(users, (std::set<std::string>{"alice", "bob", "carol", "dave", "erin"}));
  // The same seed, the same trace.
  const Trace again = GeneratePhilly(7, 1, kJobs, kRate, 5);
  for (size_t i = 0; i < t.jobs.size(); ++i) {
    EXPECT_EQ(again.jobs[i].steps, t.jobs[i].steps);
    EXPECT_EQ(again.jobs[i].submit_s, t.jobs[i].submit_s);
  }
}

TEST(GeneratedTraceTest, PhillyLengthsAreTenToTheXMinutesOnTheReferenceGpu) {
  // Lengths alone on the reference GPU, as the planner predicts them: 8 in
  // 10 between 10^1.5 and 10^3 minutes, the rest between 10^3 and 10^4.
  const Trace t = GeneratePhilly(/*seed=*/3, /*load=*/1, /*jobs=*/400, /*jobs_per_hour=*/1, 4);
  const Cluster one = OneReferenceGpu();
  SimPlanner planner(one.snapshot);
  const std::vector<JobOutcome> alone = AloneTimes(t, one, &planner);
  int long_ones = 0;
  for (const JobOutcome& o : alone) {
    ASSERT_GT(o.alone_s, 0) << o.why_not;
    const double minutes = o.alone_s / 60;
    // Steps are whole hundreds: a short job's length rounds by a little.
    EXPECT_GE(minutes, std::pow(10.0, 1.5) * 0.9);
    EXPECT_LE(minutes, std::pow(10.0, 4) * 1.01);
    if (minutes > 1000) ++long_ones;
  }
  EXPECT_NEAR(long_ones / 400.0, 0.2, 0.06);
  // --load stretches every length.
  const Trace twice = GeneratePhilly(3, /*load=*/2, 400, 1, 4);
  EXPECT_NEAR(static_cast<double>(twice.jobs[10].steps) / static_cast<double>(t.jobs[10].steps),
              2.0, 0.05);
}

TEST(GeneratedTraceTest, APhillyTraceRunsEveryJobOnTheDemoLab) {
  const Trace t = GeneratePhilly(/*seed=*/1, /*load=*/0.2, /*jobs=*/25, /*jobs_per_hour=*/2, 3);
  const Cluster lab = DemoLab();
  SimPlanner planner(lab.snapshot);
  SharedOptions options;
  options.grow_min_speedup = 1.2;
  const sim::Run shared = SimulateShared(t, lab, options, &planner);
  const sim::Run rigid = SimulateRigid(t, lab, QueueOrdering::kFifo, &planner);
  for (const sim::Run* run : {&shared, &rigid}) {
    ASSERT_EQ(run->jobs.size(), t.jobs.size());
    for (const JobOutcome& j : run->jobs) EXPECT_GT(j.end_s, j.start_s) << run->policy;
  }
}

}  // namespace
}  // namespace tessera::scheduler::sim
