// ProcessSupervisor with real child processes (/bin/sh scripts).
#include "agent/supervisor.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <future>

#include "common/atomic_file.h"
#include "common/fake_clock.h"
#include "common/faulty_file_system.h"
#include "common/faulty_process_launcher.h"
#include "tests/agent/test_util.h"

namespace tessera::agent {
namespace {

using api::WorkerKey;
using api::WorkerState;
using namespace std::chrono_literals;
using testing::Eventually;
using testing::LiveMembersOfGroup;
using testing::ProcessAlive;
using testing::ReadFile;
using testing::ShellLaunch;
using testing::TempDir;

class SupervisorTest : public ::testing::Test {
 protected:
  SupervisorOptions Options() {
    SupervisorOptions o;
    o.state_dir = state_.path();
    o.stop_grace = 500ms;
    o.poll_interval = 10ms;
    return o;
  }
  void TearDown() override {
    if (sup_) {
      EXPECT_TRUE(sup_->StopAllAndWait());
    }
    sup_.reset();
    // Reap children of supervisors that were dropped (re-adoption tests).
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }
  ProcessSupervisor& Sup() {
    if (!sup_) sup_ = std::make_unique<ProcessSupervisor>(Options());
    return *sup_;
  }
  launch::RankPaths Paths(WorkerKey key) { return launch::RankPathsFor(state_.path(), key); }
  bool LogContains(WorkerKey key, const std::string& text) {
    return ReadFile(Paths(key).log).find(text) != std::string::npos;
  }
  // The pid file a supervisor leaves for `key`, naming `pid` started at
  // `start_ticks` (clock ticks after boot, /proc/<pid>/stat's 22nd field).
  Status WritePidFile(WorkerKey key, int64_t pid, uint64_t start_ticks) {
    const launch::RankPaths p = Paths(key);
    std::filesystem::create_directories(p.dir);
    return WriteFileAtomically(*FileSystem::Default(), p.pid,
                               api::Json{{"job_id", key.job_id},
                                         {"attempt", key.attempt},
                                         {"rank", key.rank},
                                         {"pid", pid},
                                         {"start_ticks", start_ticks}}
                                   .dump());
  }

  TempDir state_;
  std::unique_ptr<ProcessSupervisor> sup_;
};

TEST_F(SupervisorTest, RecordsExitCode) {
  WorkerKey key{1, 1, 0};
  ASSERT_TRUE(Sup().Start(ShellLaunch(key, "exit 7"), {}).ok());
  auto s = Sup().WaitForExit(key, 10s);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->state, WorkerState::kExited);
  EXPECT_EQ(s->exit_code, 7);
  EXPECT_TRUE(std::filesystem::exists(Paths(key).exit));
}

TEST_F(SupervisorTest, EnvCarriesTheContractAndNothingFromTheAgent) {
  ::setenv("TESSERA_AGENT_TEST_LEAK", "1", 1);
  WorkerKey key{2, 3, 1};
  api::WorkerLaunch launch = ShellLaunch(key, "env > env.txt; pwd > cwd.txt");
  launch::EnvMap device_env = {
      {"TESSERA_DEVICE", "cpu"}, {"TESSERA_DEVICE_SPEED", "0.5"}, {"CUDA_VISIBLE_DEVICES", ""}};
  ASSERT_TRUE(Sup().Start(launch, device_env).ok());
  ASSERT_EQ(Sup().WaitForExit(key, 10s)->exit_code, 0);
  const launch::RankPaths p = Paths(key);
  const std::string env = ReadFile(p.dir / "env.txt");
  for (const std::string& want : std::vector<std::string>{
           "RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1",
           "MASTER_PORT=29500", "TESSERA_JOB_ID=2", "TESSERA_ATTEMPT=3",
           "TESSERA_CHECKPOINT_DIR=/tmp/ckpt", "TESSERA_DEVICE=cpu", "TESSERA_DEVICE_SPEED=0.5",
           "CUDA_VISIBLE_DEVICES=", "TESSERA_PLAN=" + p.plan.string(),
           "TESSERA_PROGRESS_FILE=" + p.progress.string(), "PATH="}) {
    EXPECT_NE(env.find(want + (want.back() == '=' ? "" : "\n")), std::string::npos) << want;
  }
  EXPECT_EQ(env.find("TESSERA_AGENT_TEST_LEAK"), std::string::npos);
  EXPECT_EQ(ReadFile(p.dir / "cwd.txt"), p.dir.string() + "\n");
  EXPECT_EQ(api::Json::parse(ReadFile(p.plan)), launch.plan);
  ::unsetenv("TESSERA_AGENT_TEST_LEAK");
}

// A running worker's re-formed place reaches TESSERA_REFORM_FILE, newer
// generations only; a worker that is not running gets nothing.
TEST_F(SupervisorTest, ReformWritesNewerGenerationsForARunningWorker) {
  WorkerKey key{4, 1, 2};
  ASSERT_TRUE(
      Sup().Start(ShellLaunch(key, "echo \"$TESSERA_REFORM_FILE\" > where; sleep 30"), {}).ok());
  const launch::RankPaths p = Paths(key);
  ASSERT_TRUE(Eventually([&] { return ReadFile(p.dir / "where") == p.reform.string() + "\n"; }));
  EXPECT_FALSE(std::filesystem::exists(p.reform));

  api::WorkerLaunch launch = ShellLaunch(key, "unused");
  ASSERT_TRUE(Sup().Reform(launch).ok());  // none: nothing written
  EXPECT_FALSE(std::filesystem::exists(p.reform));
  launch.reform = {{"generation", 2}, {"env", {{"RANK", "0"}}}, {"plan", api::Json::object()}};
  ASSERT_TRUE(Sup().Reform(launch).ok());
  EXPECT_EQ(api::Json::parse(ReadFile(p.reform)), launch.reform);
  api::WorkerLaunch older = launch;
  older.reform["generation"] = 1;
  older.reform["env"]["RANK"] = "5";
  ASSERT_TRUE(Sup().Reform(older).ok());
  EXPECT_EQ(api::Json::parse(ReadFile(p.reform))["env"]["RANK"], "0") << "an older one is ignored";

  Sup().Stop(key);
  ASSERT_TRUE(Sup().WaitForExit(key, 10s).has_value());
  launch.reform["generation"] = 3;
  ASSERT_TRUE(Sup().Reform(launch).ok());
  EXPECT_EQ(api::Json::parse(ReadFile(p.reform))["generation"], 2) << "not running: not written";
}

TEST_F(SupervisorTest, CapturesStdoutAndStderrAsLogTail) {
  WorkerKey key{3, 1, 0};
  ASSERT_TRUE(Sup()
                  .Start(ShellLaunch(key,
                                     "i=0; while [ $i -lt 150 ]; do echo out $i; i=$((i+1)); done;"
                                     " echo to-stderr >&2"),
                         {})
                  .ok());
  ASSERT_EQ(Sup().WaitForExit(key, 10s)->exit_code, 0);
  auto snap = Sup().Snapshot();
  ASSERT_EQ(snap.size(), 1u);
  ASSERT_EQ(snap[0].log_tail.size(), 100u);
  EXPECT_EQ(snap[0].log_tail.front(), "out 51");
  EXPECT_EQ(snap[0].log_tail[98], "out 149");
  EXPECT_EQ(snap[0].log_tail.back(), "to-stderr");
}

TEST_F(SupervisorTest, RotatesTheLogAtTheCap) {
  SupervisorOptions o = Options();
  o.log_max_bytes = 2000;
  o.log_keep = 2;
  sup_ = std::make_unique<ProcessSupervisor>(o);
  WorkerKey key{4, 1, 0};
  // Ten bursts of ~1.5 KB, each given time to be rotated.
  ASSERT_TRUE(sup_->Start(ShellLaunch(key,
                                      "b=0; while [ $b -lt 10 ]; do i=0; while [ $i -lt 30 ]; do"
                                      " echo burst $b line $i padding-padding-padding-pad;"
                                      " i=$((i+1)); done; b=$((b+1)); sleep 0.1; done"),
                          {})
                  .ok());
  ASSERT_EQ(sup_->WaitForExit(key, 20s)->exit_code, 0);
  const auto log = Paths(key).log;
  EXPECT_TRUE(std::filesystem::exists(log.string() + ".1"));
  EXPECT_TRUE(std::filesystem::exists(log.string() + ".2"));
  EXPECT_FALSE(std::filesystem::exists(log.string() + ".3"));
  EXPECT_LE(std::filesystem::file_size(log), 2000u);
  auto tail = sup_->Snapshot()[0].log_tail;
  ASSERT_FALSE(tail.empty());
  EXPECT_NE(tail.back().find("burst 9 line 29"), std::string::npos);
}

TEST_F(SupervisorTest, ReportsLastCompleteProgressLine) {
  WorkerKey key{5, 1, 0};
  ASSERT_TRUE(Sup()
                  .Start(ShellLaunch(key,
                                     "echo '{\"step\":1}' >> \"$TESSERA_PROGRESS_FILE\";"
                                     "echo '{\"step\":2}' >> \"$TESSERA_PROGRESS_FILE\";"
                                     "printf '{\"step\":3' >> \"$TESSERA_PROGRESS_FILE\";"
                                     "exec sleep 30"),
                         {})
                  .ok());
  ASSERT_TRUE(Eventually([&] {
    auto snap = Sup().Snapshot();
    return snap.size() == 1 && snap[0].progress == api::Json{{"step", 2}};
  }));
  EXPECT_EQ(Sup().Get(key)->state, WorkerState::kRunning);
}

TEST_F(SupervisorTest, StopSendsTermToTheGroup) {
  WorkerKey key{6, 1, 0};
  ASSERT_TRUE(Sup().Start(ShellLaunch(key, "sleep 30"), {}).ok());
  Sup().Stop(key);
  EXPECT_EQ(Sup().Get(key)->state, WorkerState::kStopping);
  auto s = Sup().WaitForExit(key, 10s);
  EXPECT_EQ(s->state, WorkerState::kExited);
  EXPECT_EQ(s->exit_code, 128 + SIGTERM);
}

TEST_F(SupervisorTest, EscalatesToKillWhenTermIsIgnored) {
  WorkerKey key{7, 1, 0};
  ASSERT_TRUE(Sup()
                  .Start(ShellLaunch(key,
                                     "trap '' TERM; echo ready; while true; do sleep 0.05;"
                                     " done"),
                         {})
                  .ok());
  ASSERT_TRUE(Eventually([&] { return LogContains(key, "ready"); }));
  auto t0 = std::chrono::steady_clock::now();
  Sup().Stop(key);
  auto s = Sup().WaitForExit(key, 10s);
  auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_EQ(s->state, WorkerState::kExited);
  EXPECT_EQ(s->exit_code, 128 + SIGKILL);
  EXPECT_GE(took, 450ms);  // TERM was ignored for the grace period...
  EXPECT_LT(took, 3s);     // ...and KILL followed it (grace 500 ms + margin)
}

// Waits and the stop grace run on the injected clock: WaitForExit gives up
// when that clock passes its timeout, and a worker that ignores SIGTERM is
// killed once it passes the grace, however little real time went by.
TEST_F(SupervisorTest, WaitsAndGraceRunOnTheInjectedClock) {
  FakeClock clock;
  SupervisorOptions o = Options();
  o.clock = &clock;
  o.stop_grace = 1h;
  sup_ = std::make_unique<ProcessSupervisor>(o);
  const WorkerKey key{80, 1, 0};
  ASSERT_TRUE(
      sup_->Start(ShellLaunch(key, "trap '' TERM; echo ready; while :; do sleep 0.05; done"), {})
          .ok());
  ASSERT_TRUE(Eventually([&] { return LogContains(key, "ready"); }));

  auto waited = std::async(std::launch::async, [&] { return sup_->WaitForExit(key, 1h); });
  EXPECT_EQ(waited.wait_for(200ms), std::future_status::timeout) << "the fake clock has not moved";
  clock.Advance(1h);
  const bool gave_up = waited.wait_for(10s) == std::future_status::ready;
  EXPECT_TRUE(gave_up) << "WaitForExit timed on the real clock";
  if (!gave_up) ::kill(-sup_->Get(key)->pid, SIGKILL);  // let it return
  EXPECT_EQ(waited.get()->state, WorkerState::kRunning);

  sup_->Stop(key);  // SIGTERM, ignored
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(sup_->Get(key)->state, WorkerState::kStopping) << "killed before the grace";
  clock.Advance(1h);
  // The monitor kills it on its next poll.
  ASSERT_TRUE(Eventually([&] { return sup_->Get(key)->state == WorkerState::kExited; }));
  EXPECT_EQ(sup_->Get(key)->exit_code, 128 + SIGKILL);
}

TEST_F(SupervisorTest, GroupKillReachesGrandchildrenAndLeavesNoOrphans) {
  WorkerKey key{8, 1, 0};
  ASSERT_TRUE(Sup()
                  .Start(ShellLaunch(key,
                                     "sleep 300 & echo $! > grandchild.pid;"
                                     " sh -c 'sleep 301 & wait' & wait"),
                         {})
                  .ok());
  const auto pid_file = Paths(key).dir / "grandchild.pid";
  ASSERT_TRUE(Eventually([&] { return ReadFile(pid_file).find('\n') != std::string::npos; }));
  const pid_t grandchild = std::stoi(ReadFile(pid_file));
  const pid_t leader = static_cast<pid_t>(Sup().Get(key)->pid);
  ASSERT_TRUE(Eventually([&] { return LiveMembersOfGroup(leader).size() >= 4; }));
  ASSERT_TRUE(ProcessAlive(grandchild));
  Sup().Stop(key);
  ASSERT_EQ(Sup().WaitForExit(key, 10s)->state, WorkerState::kExited);
  EXPECT_TRUE(Eventually([&] { return !ProcessAlive(grandchild); }, 3s));
  EXPECT_TRUE(Eventually([&] { return LiveMembersOfGroup(leader).empty(); }, 3s));
}

TEST_F(SupervisorTest, LeftoverGroupMembersDieWithANaturallyEndingLeader) {
  WorkerKey key{9, 1, 0};
  ASSERT_TRUE(Sup().Start(ShellLaunch(key, "sleep 300 & echo $! > bg.pid; exit 0"), {}).ok());
  ASSERT_EQ(Sup().WaitForExit(key, 10s)->exit_code, 0);
  const pid_t bg = std::stoi(ReadFile(Paths(key).dir / "bg.pid"));
  EXPECT_TRUE(Eventually([&] { return !ProcessAlive(bg); }, 3s));
}

TEST_F(SupervisorTest, NeverStartsTheSameKeyTwice) {
  WorkerKey key{10, 1, 0};
  const auto launch = ShellLaunch(key, "echo run >> runs.txt");
  ASSERT_TRUE(Sup().Start(launch, {}).ok());
  ASSERT_EQ(Sup().WaitForExit(key, 10s)->state, WorkerState::kExited);
  EXPECT_TRUE(Sup().Start(launch, {}).ok());  // known: no-op
  Sup().Forget(key);
  EXPECT_FALSE(Sup().Get(key).has_value());
  // Forgotten, but exit.json remembers: not started again.
  EXPECT_EQ(Sup().Start(launch, {}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Sup().Get(key)->state, WorkerState::kExited);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(ReadFile(Paths(key).dir / "runs.txt"), "run\n");
}

TEST_F(SupervisorTest, ExecFailureIsAnExitedWorkerWithReasonInLog) {
  WorkerKey key{11, 1, 0};
  api::WorkerLaunch launch = ShellLaunch(key, "");
  launch.argv = {"/nonexistent/tessera-worker"};
  EXPECT_FALSE(Sup().Start(launch, {}).ok());
  auto s = Sup().Get(key);
  EXPECT_EQ(s->state, WorkerState::kExited);
  EXPECT_EQ(s->exit_code, kExitCodeLaunchFailed);
  auto tail = Sup().Snapshot()[0].log_tail;
  ASSERT_FALSE(tail.empty());
  EXPECT_NE(tail.back().find("cannot execute"), std::string::npos) << tail.back();
}

// A rank file that cannot be written (its fsync or its rename fails) is
// not swallowed: the plan's failure fails the start, the pid file's is
// returned by Start, exit.json's is said in the worker's log.
TEST_F(SupervisorTest, RankFilesThatCannotBeWrittenSurface) {
  struct Case {
    FileOp op;
    const char* file;
    int err;
    bool started;  // the worker ran
  };
  const Case cases[] = {
      {FileOp::kSync, "plan.json", EIO, false},   {FileOp::kRename, "plan.json", EXDEV, false},
      {FileOp::kSync, "worker.pid", EIO, true},   {FileOp::kRename, "worker.pid", EXDEV, true},
      {FileOp::kSync, "exit.json", ENOSPC, true}, {FileOp::kRename, "exit.json", EROFS, true},
  };
  int64_t job = 60;
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.file) + (c.op == FileOp::kSync ? " fsync" : " rename"));
    FaultyFileSystem faulty;
    faulty.FailNext(c.op, c.file, c.err);
    SupervisorOptions o = Options();
    o.fs = &faulty;
    ProcessSupervisor sup(o);
    const WorkerKey key{job++, 1, 0};
    const launch::RankPaths p = Paths(key);
    Status started = sup.Start(ShellLaunch(key, "echo ran"), {});
    auto s = sup.WaitForExit(key, 10s);
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(s->state, WorkerState::kExited);
    EXPECT_EQ(faulty.fired(), 1);
    const std::string log = ReadFile(p.log);
    const std::string cause = std::strerror(c.err);
    EXPECT_EQ(log.find("ran\n") != std::string::npos, c.started) << log;
    const std::string file = (p.dir / c.file).string();
    if (std::string(c.file) == "plan.json") {
      EXPECT_EQ(started.code(), StatusCode::kInternal);
      EXPECT_NE(started.message().find("cannot write " + file), std::string::npos)
          << started.message();
      EXPECT_EQ(s->exit_code, kExitCodeLaunchFailed);
      EXPECT_NE(log.find("cannot start"), std::string::npos) << log;
      EXPECT_NE(log.find(cause), std::string::npos) << log;
    } else if (std::string(c.file) == "worker.pid") {
      EXPECT_EQ(started.code(), StatusCode::kInternal);
      EXPECT_EQ(started.message().rfind(
                    "pid file (re-adoption will miss this worker): cannot write " + file, 0),
                0u)
          << started.message();
      EXPECT_NE(started.message().find(cause), std::string::npos) << started.message();
      EXPECT_EQ(s->exit_code, 0);
    } else {
      EXPECT_TRUE(started.ok()) << started.ToString();
      EXPECT_EQ(s->exit_code, 0);
      EXPECT_FALSE(std::filesystem::exists(p.exit));
      EXPECT_NE(log.find("cannot record the exit of job " + std::to_string(key.job_id)),
                std::string::npos)
          << log;
      EXPECT_NE(log.find("cannot write " + file), std::string::npos) << log;
      EXPECT_NE(log.find(cause), std::string::npos) << log;
    }
    // No temporary file is left in the rank folder.
    for (const auto& e : std::filesystem::directory_iterator(p.dir)) {
      EXPECT_FALSE(IsTempFileName(e.path().filename().string())) << e.path();
    }
  }
}

// A launch that fails (here: fork, injected) is returned and recorded as an
// exited worker with the reason in its log; the next launch is unaffected.
TEST_F(SupervisorTest, LaunchFailureIsAnExitedWorkerWithReasonInLog) {
  FaultyProcessLauncher launcher;
  launcher.FailNextLaunch(EAGAIN);
  SupervisorOptions o = Options();
  o.launcher = &launcher;
  sup_ = std::make_unique<ProcessSupervisor>(o);
  const WorkerKey failed{70, 1, 0}, next{71, 1, 0};
  Status st = sup_->Start(ShellLaunch(failed, "echo never"), {});
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_EQ(st.message(),
            "job 70 attempt 1 rank 0: fork failed: " + std::string(std::strerror(EAGAIN)));
  EXPECT_EQ(sup_->Get(failed)->state, WorkerState::kExited);
  EXPECT_EQ(sup_->Get(failed)->exit_code, kExitCodeLaunchFailed);
  EXPECT_TRUE(LogContains(failed, "cannot start job 70 attempt 1 rank 0: internal: fork failed"));
  EXPECT_FALSE(LogContains(failed, "never"));
  ASSERT_TRUE(sup_->Start(ShellLaunch(next, "exit 0"), {}).ok());
  EXPECT_EQ(sup_->WaitForExit(next, 10s)->exit_code, 0);
  EXPECT_EQ(launcher.fired(), 1);
}

TEST_F(SupervisorTest, RelativeArgv0IsRejected) {
  WorkerKey key{12, 1, 0};
  api::WorkerLaunch launch = ShellLaunch(key, "");
  launch.argv = {"sh", "-c", "true"};
  Status st = Sup().Start(launch, {});
  EXPECT_EQ(st.field(), "argv[0]");
  EXPECT_EQ(Sup().Get(key)->exit_code, kExitCodeLaunchFailed);
}

TEST_F(SupervisorTest, RejectRecordsAnExitedWorker) {
  WorkerKey key{13, 1, 0};
  Sup().Reject(ShellLaunch(key, "true"), InvalidArgument("no device 9", "device_indices[0]"));
  EXPECT_EQ(Sup().Get(key)->exit_code, kExitCodeLaunchFailed);
  EXPECT_TRUE(LogContains(key, "no device 9"));
}

TEST_F(SupervisorTest, RestartedSupervisorReadoptsLiveWorkersAndDropsStalePidFiles) {
  WorkerKey live{20, 1, 0};
  WorkerKey dead{20, 1, 1};
  WorkerKey ended{20, 1, 2};
  WorkerKey reused{20, 1, 3};
  pid_t live_pid = 0;
  pid_t dead_pid = 0;
  {
    ProcessSupervisor first(Options());
    ASSERT_TRUE(first.Start(ShellLaunch(live, "exec sleep 60"), {}).ok());
    ASSERT_TRUE(first.Start(ShellLaunch(dead, "exec sleep 60"), {}).ok());
    ASSERT_TRUE(first.Start(ShellLaunch(ended, "exit 4"), {}).ok());
    ASSERT_EQ(first.WaitForExit(ended, 10s)->exit_code, 4);
    live_pid = static_cast<pid_t>(first.Get(live)->pid);
    dead_pid = static_cast<pid_t>(first.Get(dead)->pid);
  }  // the first agent goes away; its workers keep running
  ASSERT_TRUE(ProcessAlive(live_pid));
  // One worker dies while no agent runs.
  ::kill(dead_pid, SIGKILL);
  ::waitpid(dead_pid, nullptr, 0);
  // A pid file whose pid now belongs to another process (this test).
  ASSERT_TRUE(WritePidFile(reused, ::getpid(), 1).ok());

  sup_ = std::make_unique<ProcessSupervisor>(Options());
  auto report = sup_->Recover();
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->adopted, 1);
  EXPECT_EQ(report->exited, 1);
  EXPECT_EQ(report->dropped, 2);

  auto s = sup_->Get(live);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->state, WorkerState::kRunning);
  EXPECT_EQ(s->pid, live_pid);
  EXPECT_EQ(sup_->Get(ended)->exit_code, 4);
  for (WorkerKey k : {dead, reused}) {
    EXPECT_EQ(sup_->Get(k)->state, WorkerState::kExited);
    EXPECT_EQ(sup_->Get(k)->exit_code, kExitCodeUnknown);
    EXPECT_FALSE(std::filesystem::exists(Paths(k).pid));
  }
  EXPECT_TRUE(ProcessAlive(::getpid()));  // the reused pid was not signalled

  // The adopted worker can be stopped like any other.
  sup_->Stop(live);
  EXPECT_EQ(sup_->WaitForExit(live, 10s)->state, WorkerState::kExited);
  ::waitpid(live_pid, nullptr, 0);  // this test process is its real parent
  EXPECT_FALSE(ProcessAlive(live_pid));
}

TEST_F(SupervisorTest, ReadoptionRejectsAPidWhoseEnvironDoesNotMatch) {
  // This test process's pid with its real start time but without the
  // worker's identity in its environment: pid reuse, not our worker.
  WorkerKey key{21, 1, 0};
  std::string stat = ReadFile("/proc/self/stat");
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string field;
  for (int i = 3; i <= 22; ++i) fields >> field;
  ASSERT_TRUE(WritePidFile(key, ::getpid(), std::stoull(field)).ok());
  sup_ = std::make_unique<ProcessSupervisor>(Options());
  auto report = sup_->Recover();
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->adopted, 0);
  EXPECT_EQ(report->dropped, 1);
}

// ---- what a launch may not do, and where it runs ----

TEST_F(SupervisorTest, LaunchesThatSetADeniedEnvKeyAreRefused) {
  struct Row {
    const char* key;
  } rows[] = {{"LD_PRELOAD"}, {"PATH"}, {"PYTHONPATH"}, {"BASH_ENV"}, {"NCCL_NET_PLUGIN"}};
  int64_t job = 60;
  for (const Row& row : rows) {
    WorkerKey key{job++, 1, 1};
    const std::filesystem::path marker = state_.path() / (std::string("ran-") + row.key);
    api::WorkerLaunch launch = ShellLaunch(key, "touch " + marker.string());
    launch.env[row.key] = "/tmp/evil";
    Status st = Sup().Start(launch, {});
    EXPECT_EQ(st.field(), std::string("env.") + row.key) << st.ToString();
    auto s = Sup().WaitForExit(key, 10s);
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(s->exit_code, kExitCodeLaunchFailed);
    EXPECT_FALSE(std::filesystem::exists(marker)) << row.key << ": the worker ran";
    EXPECT_TRUE(LogContains(key, std::string("env.") + row.key));
  }
}

TEST_F(SupervisorTest, RankZeroIsRefusedWhileItsMasterPortIsTaken) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string port = std::to_string(ntohs(a.sin_port));

  WorkerKey master{70, 1, 0}, other{70, 1, 1};
  api::WorkerLaunch launch = ShellLaunch(master, "exit 0");
  launch.env["MASTER_PORT"] = port;
  Status st = Sup().Start(launch, {});
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
  EXPECT_EQ(Sup().WaitForExit(master, 10s)->exit_code, kExitCodeLaunchFailed);
  EXPECT_TRUE(LogContains(master, "MASTER_PORT"));
  // The refusal names who holds the port: this test process, listening.
  EXPECT_NE(st.message().find("pid " + std::to_string(::getpid())), std::string::npos)
      << st.ToString();
  EXPECT_NE(st.message().find("listening"), std::string::npos) << st.ToString();
  // Only rank 0 hosts the store: the others just connect to it.
  api::WorkerLaunch peer = ShellLaunch(other, "exit 0");
  peer.env["MASTER_PORT"] = port;
  EXPECT_TRUE(Sup().Start(peer, {}).ok());
  EXPECT_EQ(Sup().WaitForExit(other, 10s)->exit_code, 0);
  ::close(fd);
  // Free again: a later attempt's rank 0 starts.
  WorkerKey next{70, 2, 0};
  api::WorkerLaunch again = ShellLaunch(next, "exit 0");
  again.env["MASTER_PORT"] = port;
  EXPECT_TRUE(Sup().Start(again, {}).ok());
  EXPECT_EQ(Sup().WaitForExit(next, 10s)->exit_code, 0);
}

mode_t ModeOf(const std::filesystem::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

TEST_F(SupervisorTest, RankFoldersAreClosedToOtherAccounts) {
  WorkerKey key{80, 2, 1};
  ASSERT_TRUE(Sup().Start(ShellLaunch(key, "exit 0"), {}).ok());
  ASSERT_EQ(Sup().WaitForExit(key, 10s)->exit_code, 0);
  const launch::RankPaths p = Paths(key);
  for (const std::filesystem::path& dir :
       {p.dir.parent_path().parent_path(), p.dir.parent_path(), p.dir}) {
    EXPECT_EQ(ModeOf(dir), 0700u) << dir;
  }
  EXPECT_EQ(ModeOf(p.log) & 077, 0u);
  EXPECT_EQ(ModeOf(p.progress) & 077, 0u);
}

TEST_F(SupervisorTest, RunAsNamesAnAccountThatExistsAndIsNotRoot) {
  struct Row {
    const char* account;
    const char* why;
  } rows[] = {{"no-such-account-here", "no Unix account"}, {"root", "never run as root"}};
  int64_t job = 90;
  for (const Row& row : rows) {
    WorkerKey key{job++, 1, 1};
    api::WorkerLaunch launch = ShellLaunch(key, "exit 0");
    launch.run_as = row.account;
    Status st = Sup().Start(launch, {});
    EXPECT_EQ(st.field(), "run_as") << st.ToString();
    EXPECT_NE(st.message().find(row.why), std::string::npos) << st.ToString();
    EXPECT_EQ(Sup().WaitForExit(key, 10s)->exit_code, kExitCodeLaunchFailed);
  }
}

// A root agent drops the worker to its account before exec; the folders
// stay the agent's (the worker may enter, not change them).
TEST_F(SupervisorTest, RootAgentStartsTheWorkerAsTheRunAsAccount) {
  struct passwd* nobody = ::getpwnam("nobody");
  if (::geteuid() != 0 || nobody == nullptr) {
    GTEST_SKIP() << "needs root and an account named nobody";
  }
  const uid_t uid = nobody->pw_uid;
  const gid_t gid = nobody->pw_gid;
  WorkerKey key{95, 1, 1};
  api::WorkerLaunch launch =
      ShellLaunch(key,
                  "echo \"ids $(id -u) $(id -g) groups=$(id -G) home=$HOME user=$USER\"; "
                  "echo '{\"step\":1}' >> \"$TESSERA_PROGRESS_FILE\" && echo progress-ok; "
                  "cat \"$TESSERA_PLAN\" > /dev/null && echo plan-ok; "
                  "touch intruder 2>/dev/null || echo cwd-closed");
  launch.run_as = "nobody";
  ASSERT_TRUE(Sup().Start(launch, {}).ok());
  ASSERT_EQ(Sup().WaitForExit(key, 10s)->exit_code, 0);
  const std::string log = ReadFile(Paths(key).log);
  EXPECT_NE(log.find("ids " + std::to_string(uid) + " " + std::to_string(gid) + " "),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("groups=0"), std::string::npos) << "kept root's groups: " << log;
  EXPECT_NE(log.find("user=nobody"), std::string::npos) << log;
  for (const char* line : {"progress-ok", "plan-ok", "cwd-closed"}) {
    EXPECT_NE(log.find(line), std::string::npos) << line << "\n" << log;
  }
  const launch::RankPaths p = Paths(key);
  EXPECT_EQ(ModeOf(p.dir), 0710u);
  struct stat st {};
  ASSERT_EQ(::stat(p.dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_gid, gid);
  EXPECT_FALSE(std::filesystem::exists(p.dir / "intruder"));
}

}  // namespace
}  // namespace tessera::agent
