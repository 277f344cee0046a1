// ProcessLauncher with real children: exit code, environment, folder,
// output file, process group, signal mask, descriptors, the exit-code shim,
// start failures both ways; and FaultyProcessLauncher's injected failure.
#include "common/process_launcher.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/faulty_process_launcher.h"
#include "tests/common/temp_dir.h"

namespace tessera {
namespace {
namespace fs = std::filesystem;
using testing::Slurp;
using testing::TempDir;

// A spec running `/bin/sh -c script` with a small clean environment.
ProcessSpec Shell(const std::string& script) {
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", script};
  spec.env = std::vector<std::string>{"PATH=/usr/bin:/bin"};
  return spec;
}

// The exit code of a child (128 + signal when killed).
int Wait(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

class ProcessLauncherTest : public ::testing::Test {
 protected:
  ProcessLauncher& launcher() { return *ProcessLauncher::Default(); }
  fs::path Out() const { return dir_.path() / "out.log"; }
  TempDir dir_;
};

TEST_F(ProcessLauncherTest, RunsTheProgramWithItsEnvironmentFolderAndOutput) {
  ProcessSpec spec = Shell("echo \"$FOO\"; pwd; echo oops >&2; exit 7");
  spec.env->push_back("FOO=bar baz");
  spec.cwd = dir_.path().string();
  spec.stdin_from = ChildStdio::Null();
  spec.stdout_to = ChildStdio::AppendFile(Out().string());
  spec.stderr_to = ChildStdio::AppendFile(Out().string());
  Result<pid_t> pid = launcher().Launch(spec);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  EXPECT_EQ(Wait(*pid), 7);
  EXPECT_EQ(Slurp(Out()), "bar baz\n" + dir_.path().string() + "\noops\n");
  // Appended, not truncated.
  spec.argv = {"/bin/sh", "-c", "echo second"};
  pid = launcher().Launch(spec);
  ASSERT_TRUE(pid.ok());
  EXPECT_EQ(Wait(*pid), 0);
  EXPECT_EQ(Slurp(Out()), "bar baz\n" + dir_.path().string() + "\noops\nsecond\n");
}

TEST_F(ProcessLauncherTest, WithoutAnEnvironmentTheChildGetsTheLaunchers) {
  ::setenv("TESSERA_LAUNCHER_TEST", "inherited", 1);
  ProcessSpec spec = Shell("echo \"$TESSERA_LAUNCHER_TEST\"");
  spec.env.reset();
  spec.stdout_to = ChildStdio::AppendFile(Out().string());
  Result<pid_t> pid = launcher().Launch(spec);
  ASSERT_TRUE(pid.ok());
  EXPECT_EQ(Wait(*pid), 0);
  EXPECT_EQ(Slurp(Out()), "inherited\n");
}

// Fields 5 and 6 of /proc/<pid>/stat: process group and session.
TEST_F(ProcessLauncherTest, ProcessGroupAndSession) {
  struct Case {
    ChildProcessGroup group;
    bool own_group, own_session;
  };
  const Case cases[] = {{ChildProcessGroup::kInherit, false, false},
                        {ChildProcessGroup::kNewGroup, true, false},
                        {ChildProcessGroup::kNewSession, true, true}};
  for (const Case& c : cases) {
    fs::remove(Out());
    ProcessSpec spec = Shell("cut -d' ' -f5,6 /proc/$$/stat");
    spec.group = c.group;
    spec.stdout_to = ChildStdio::AppendFile(Out().string());
    Result<pid_t> pid = launcher().Launch(spec);
    ASSERT_TRUE(pid.ok());
    ASSERT_EQ(Wait(*pid), 0);
    std::istringstream ids(Slurp(Out()));
    pid_t pgid = 0, sid = 0;
    ASSERT_TRUE(ids >> pgid >> sid) << Slurp(Out());
    EXPECT_EQ(pgid, c.own_group ? *pid : ::getpgrp()) << static_cast<int>(c.group);
    EXPECT_EQ(sid, c.own_session ? *pid : ::getsid(0)) << static_cast<int>(c.group);
  }
}

TEST_F(ProcessLauncherTest, SignalMaskIsInheritedOrSet) {
  sigset_t usr1, old;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  ::pthread_sigmask(SIG_BLOCK, &usr1, &old);
  struct Case {
    bool set_empty;
    std::string blocked;  // SigBlk of /proc/<pid>/status
  };
  const Case cases[] = {{false, "0000000000000200"}, {true, "0000000000000000"}};
  for (const Case& c : cases) {
    fs::remove(Out());
    ProcessSpec spec = Shell("grep SigBlk /proc/$$/status | cut -f2");
    if (c.set_empty) {
      sigset_t none;
      sigemptyset(&none);
      spec.signal_mask = none;
    }
    spec.stdout_to = ChildStdio::AppendFile(Out().string());
    Result<pid_t> pid = launcher().Launch(spec);
    ASSERT_TRUE(pid.ok());
    ASSERT_EQ(Wait(*pid), 0);
    EXPECT_EQ(Slurp(Out()), c.blocked + "\n") << c.set_empty;
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

TEST_F(ProcessLauncherTest, OtherDescriptorsAreClosedOnRequest) {
  const int leaked = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC: inherited
  ASSERT_GE(leaked, 3);
  for (bool close_others : {false, true}) {
    fs::remove(Out());
    ProcessSpec spec = Shell("test -e /proc/$$/fd/" + std::to_string(leaked) + " && echo open");
    spec.close_other_fds = close_others;
    spec.stdout_to = ChildStdio::AppendFile(Out().string());
    Result<pid_t> pid = launcher().Launch(spec);
    ASSERT_TRUE(pid.ok());
    Wait(*pid);
    EXPECT_EQ(Slurp(Out()), close_others ? "" : "open\n") << close_others;
  }
  ::close(leaked);
}

TEST_F(ProcessLauncherTest, StartFailuresAreReturnedOrLeftToTheChild) {
  ProcessSpec missing;
  missing.argv = {(dir_.path() / "no-such-program").string()};
  Result<pid_t> pid = launcher().Launch(missing);
  ASSERT_FALSE(pid.ok());
  EXPECT_EQ(pid.status().code(), StatusCode::kInternal);
  EXPECT_EQ(pid.status().message(),
            "cannot execute " + missing.argv[0] + ": " + std::strerror(ENOENT));

  ProcessSpec bad_folder = Shell("true");
  bad_folder.cwd = (dir_.path() / "no-such-folder").string();
  EXPECT_EQ(launcher().Launch(bad_folder).status().message(),
            "cannot execute /bin/sh: " + std::string(std::strerror(ENOENT)));

  missing.on_start_failure = StartFailure::kExitInChild;
  missing.start_failure_message = "cannot run it\n";
  missing.stderr_to = ChildStdio::AppendFile(Out().string());
  pid = launcher().Launch(missing);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  EXPECT_EQ(Wait(*pid), 127);
  EXPECT_EQ(Slurp(Out()), "cannot run it\n");

  ProcessSpec no_file = Shell("true");
  no_file.stdout_to = ChildStdio::AppendFile((dir_.path() / "no" / "log").string());
  EXPECT_EQ(launcher().Launch(no_file).status().message(),
            "cannot open " + (dir_.path() / "no" / "log").string() + ": " + std::strerror(ENOENT));
  EXPECT_EQ(launcher().Launch(ProcessSpec{}).status().code(), StatusCode::kInvalidArgument);
}

// The shim records how the program ended in a file of its folder, and exits
// with the same code.
TEST_F(ProcessLauncherTest, ShimRecordsTheProgramsExitCode) {
  struct Case {
    std::string script;
    int code;
  };
  const Case cases[] = {{"exit 3", 3}, {"kill -KILL $$", 137}, {"kill -TERM $$", 143}};
  for (const Case& c : cases) {
    ProcessSpec spec = Shell(c.script);
    spec.cwd = dir_.path().string();
    spec.group = ChildProcessGroup::kNewSession;
    spec.exit_code_file = "exit_code";
    Result<pid_t> pid = launcher().Launch(spec);
    ASSERT_TRUE(pid.ok());
    EXPECT_EQ(Wait(*pid), c.code) << c.script;
    EXPECT_EQ(Slurp(dir_.path() / "exit_code"), std::to_string(c.code) + "\n") << c.script;
    EXPECT_FALSE(fs::exists(dir_.path() / "exit_code.tmp"));
  }
}

TEST_F(ProcessLauncherTest, AccountDropIsRefusedWithoutThePrivilege) {
  ProcessSpec spec = Shell("id -u");
  spec.run_as = ChildAccount{65534, 65534, {65534}};
  spec.stdout_to = ChildStdio::AppendFile(Out().string());
  Result<pid_t> pid = launcher().Launch(spec);
  if (::geteuid() != 0) {
    ASSERT_FALSE(pid.ok());
    EXPECT_EQ(pid.status().message(),
              "cannot execute /bin/sh: " + std::string(std::strerror(EPERM)));
    return;
  }
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  EXPECT_EQ(Wait(*pid), 0);
  EXPECT_EQ(Slurp(Out()), "65534\n");
}

// A child whose launcher dies gets the parent-death signal.
TEST_F(ProcessLauncherTest, ParentDeathSignalEndsTheChild) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t middle = ::fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    ProcessSpec spec = Shell("sleep 30");
    spec.parent_death_signal = SIGKILL;
    Result<pid_t> pid = ProcessLauncher::Default()->Launch(spec);
    const pid_t sent = pid.ok() ? *pid : -1;
    ssize_t ignored = ::write(fds[1], &sent, sizeof(sent));
    (void)ignored;
    ::_exit(0);
  }
  ::close(fds[1]);
  pid_t child = -1;
  ASSERT_EQ(::read(fds[0], &child, sizeof(child)), static_cast<ssize_t>(sizeof(child)));
  ::close(fds[0]);
  ASSERT_GT(child, 0);
  EXPECT_EQ(Wait(middle), 0);
  // Gone, or a zombie waiting for whoever adopted it.
  auto dead = [child] {
    const std::string stat = Slurp("/proc/" + std::to_string(child) + "/stat");
    const size_t paren = stat.rfind(')');
    return paren == std::string::npos || stat.compare(paren + 1, 2, " Z") == 0;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!dead() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(dead()) << "the child outlived its launcher";
}

TEST(FaultyProcessLauncherTest, FailsTheArmedLaunchOnce) {
  FaultyProcessLauncher faulty;
  faulty.FailNextLaunch(EAGAIN, "/bin/sh");
  ProcessSpec other;
  other.argv = {"/bin/true"};
  Result<pid_t> first = faulty.Launch(other);  // another program: real
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(Wait(*first), 0);
  Result<pid_t> failed = faulty.Launch(Shell("exit 0"));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kInternal);
  EXPECT_EQ(failed.status().message(), "fork failed: " + std::string(std::strerror(EAGAIN)));
  Result<pid_t> again = faulty.Launch(Shell("exit 4"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Wait(*again), 4);
  EXPECT_EQ(faulty.fired(), 1);
}

}  // namespace
}  // namespace tessera
