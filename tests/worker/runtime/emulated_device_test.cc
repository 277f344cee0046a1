// EmulatedDevice: busy time = CPU work / speed, whatever else runs on the host.
//
// The property test runs 2 and 4 co-located emulated ranks as real processes
// whose compute together keeps every core of this host busy (speeds adding up
// to 90% of the cores, so the ranks often wait for a core while computing):
// each must measure its busy time within 10% of its CPU work / its speed. The
// emulator this replaced multiplied the wall time of the compute, core waits
// included, and missed it by far more; the test prints what that would read.
#include "worker/runtime/emulated_device.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

namespace tessera::worker {
namespace {

struct RankTimes {
  double busy_s = 0;       // what the device reports: sum of segment busy times
  double cpu_s = 0;        // CPU work of the segments
  double work_wall_s = 0;  // wall time of the work alone (core waits included)
};

// Spends `cpu_s` of the calling thread's CPU time.
void BurnCpu(double cpu_s) {
  const double until = CpuSeconds(CpuClock::kThread) + cpu_s;
  volatile double x = 1.0;
  while (CpuSeconds(CpuClock::kThread) < until) {
    for (int i = 0; i < 2000; ++i) x = std::sqrt(x + 1.0);
  }
}

RankTimes RunRank(double speed, int segments, double segment_cpu_s) {
  const EmulatedDevice device(speed);
  RankTimes t;
  for (int i = 0; i < segments; ++i) {
    const EmulatedDevice::Segment s = device.Begin();
    BurnCpu(segment_cpu_s);
    t.work_wall_s += std::chrono::duration<double>(EmulatedDevice::Clock::now() - s.wall0).count();
    const EmulatedDevice::SegmentTimes st = device.End(s);
    t.busy_s += st.busy_s;
    t.cpu_s += st.cpu_s;
    // Between segments a rank waits for peers (a send, an all-reduce).
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return t;
}

// Runs `ranks` processes at once, each at `speed`; returns their times.
std::vector<RankTimes> RunColocated(int ranks, double speed) {
  std::vector<std::pair<pid_t, int>> children;
  for (int r = 0; r < ranks; ++r) {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      RankTimes t = RunRank(speed, 40, 0.015);
      const ssize_t n = ::write(fds[1], &t, sizeof t);
      ::_exit(n == sizeof t ? 0 : 1);
    }
    ::close(fds[1]);
    children.emplace_back(pid, fds[0]);
  }
  std::vector<RankTimes> out;
  for (auto [pid, fd] : children) {
    RankTimes t;
    EXPECT_EQ(::read(fd, &t, sizeof t), static_cast<ssize_t>(sizeof t));
    ::close(fd);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    out.push_back(t);
  }
  return out;
}

class EmulatedDeviceContention : public ::testing::TestWithParam<int> {};

TEST_P(EmulatedDeviceContention, BusyTimeIsCpuWorkOverSpeed) {
  const int ranks = GetParam();
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const double speed = 0.9 * cores / ranks;
  if (speed > 1.0) GTEST_SKIP() << "needs at least " << ranks << " ranks per 0.9 cores";
  const std::vector<RankTimes> times = RunColocated(ranks, speed);
  ASSERT_EQ(times.size(), static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    const RankTimes& t = times[r];
    const double want = t.cpu_s / speed;
    const double old_emulator = t.work_wall_s / speed;  // wall x 1/speed, core waits included
    std::printf(
        "rank %d/%d speed %.3f: cpu %.3f s, busy %.3f s (want %.3f, %+.1f%%); "
        "wall-clock emulator would read %.3f s (%+.1f%%)\n",
        r, ranks, speed, t.cpu_s, t.busy_s, want, (t.busy_s / want - 1) * 100, old_emulator,
        (old_emulator / want - 1) * 100);
    EXPECT_GT(t.cpu_s, 0.5) << "the rank did its CPU work";
    EXPECT_NEAR(t.busy_s, want, 0.10 * want) << "rank " << r << " of " << ranks;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, EmulatedDeviceContention, ::testing::Values(2, 4),
                         [](const auto& info) { return std::to_string(info.param) + "_ranks"; });

TEST(EmulatedDeviceTest, FullSpeedDoesNotHold) {
  const EmulatedDevice device(1.0);
  EXPECT_FALSE(device.holds());
  const EmulatedDevice::Segment s = device.Begin();
  BurnCpu(0.02);
  const EmulatedDevice::SegmentTimes t = device.End(s);
  EXPECT_GE(t.cpu_s, 0.02);
  EXPECT_LT(t.busy_s, 0.2) << "no hold at speed 1";
}

TEST(EmulatedDeviceTest, WaitingIsNotWork) {
  // A segment that only waits (as in a blocking collective) takes no CPU, so a slow
  // device does not multiply it.
  const EmulatedDevice device(0.1);
  const EmulatedDevice::Segment s = device.Begin();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const EmulatedDevice::SegmentTimes t = device.End(s);
  EXPECT_LT(t.cpu_s, 0.01);
  EXPECT_LT(t.busy_s, 0.2) << "50 ms of waiting must not become 500 ms";
  EXPECT_GE(t.busy_s, 0.05);
}

TEST(EmulatedDeviceTest, HalfSpeedHoldsTwiceTheWork) {
  const EmulatedDevice device(0.5);
  const EmulatedDevice::Segment s = device.Begin();
  BurnCpu(0.05);
  const EmulatedDevice::SegmentTimes t = device.End(s);
  EXPECT_GE(t.busy_s, 2 * t.cpu_s - 1e-3);
}

}  // namespace
}  // namespace tessera::worker
