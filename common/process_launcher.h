// ProcessLauncher: the one way Tessera starts a child process (fork, set the
// child up, exec), so tests can make a launch fail.
//
// A ProcessSpec says everything about the child: its argv and environment,
// folder, standard descriptors, process group, signal mask, parent-death
// signal, account, and whether a shim stays between the launcher and the
// program to record its exit code. ProcessLauncher::Default() is the real
// launcher; FaultyProcessLauncher (common/faulty_process_launcher.h) fails
// chosen launches.
//
// The child, between fork and exec, in this order (only async-signal-safe
// calls; everything is prepared before the fork):
//   1. new session (setsid) or new process group (setpgid, also done by the
//      parent so the group exists when Launch returns);
//   2. signal mask; every signal's disposition back to default;
//   3. parent-death signal (and exit 127 at once if the launcher already
//      died);
//   4. stdin, stdout, stderr;
//   5. folder;
//   6. every other descriptor closed;
//   7. the shim (see exit_code_file), which forks the program;
//   8. the account: supplementary groups, gid, uid (the program only);
//   9. execve of argv[0] (a path: no PATH search).
// If a step of 4-9 fails the child exits with 127 and, per
// on_start_failure, either Launch returns the error (an error pipe carries
// the errno) or the child only writes start_failure_message to its stderr
// and Launch returns its pid, like a program that exits 127 at once.
//
// Errors of Launch (kInternal): "cannot prepare launch: <errno text>" (pipe
// or /dev/null), "cannot open <path>: <errno text>" (an output file),
// "fork failed: <errno text>", "cannot execute <argv[0]>: <errno text>" (a
// failure in the child, kReturnError only). kInvalidArgument for an empty
// argv.
//
// Ownership: callers keep a ProcessLauncher* they do not own; Default() is
// never destroyed. The caller reaps the child (waitpid) and owns the
// descriptors it passed in (ChildStdio::Fd; the launcher does not close
// them). Thread safety: Launch may be called from any thread.
#ifndef TESSERA_COMMON_PROCESS_LAUNCHER_H_
#define TESSERA_COMMON_PROCESS_LAUNCHER_H_

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tessera {

// Where one standard descriptor of the child comes from or goes to.
struct ChildStdio {
  enum class Kind { kInherit, kNull, kFd, kAppendFile };
  Kind kind = Kind::kInherit;
  int fd = -1;           // kFd: a descriptor of the caller, dup'ed in the child
  std::string path;      // kAppendFile: opened by Launch (O_APPEND | O_CREAT)
  uint32_t mode = 0644;  // kAppendFile: permission bits of a new file

  static ChildStdio Inherit() { return {}; }
  static ChildStdio Null() { return {Kind::kNull}; }  // /dev/null
  static ChildStdio Fd(int fd) { return {Kind::kFd, fd}; }
  static ChildStdio AppendFile(std::string path, uint32_t mode = 0644) {
    return {Kind::kAppendFile, -1, std::move(path), mode};
  }
};

// The account the program runs as (resolved by the caller before Launch:
// getpwnam is not async-signal-safe).
struct ChildAccount {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups
};

enum class ChildProcessGroup {
  kInherit,     // the launcher's
  kNewGroup,    // setpgid(0, 0): its own group, pgid == pid
  kNewSession,  // setsid(): its own session and group, pgid == pid
};

enum class StartFailure {
  kReturnError,  // Launch returns the error (see the file comment)
  kExitInChild,  // the child writes start_failure_message to stderr, exits 127
};

struct ProcessSpec {
  // REQUIRES: non-empty; argv[0] is the program's path.
  std::vector<std::string> argv;
  // "KEY=VALUE" entries: the child's whole environment. nullopt: the
  // launcher's own.
  std::optional<std::vector<std::string>> env;
  std::string cwd;  // empty: the launcher's folder
  ChildStdio stdin_from = ChildStdio::Inherit();
  ChildStdio stdout_to = ChildStdio::Inherit();
  ChildStdio stderr_to = ChildStdio::Inherit();
  ChildProcessGroup group = ChildProcessGroup::kInherit;
  std::optional<sigset_t> signal_mask;     // the child's mask; nullopt: inherited
  bool default_signal_handlers = false;    // every disposition (SIG_IGN too) to SIG_DFL
  std::optional<int> parent_death_signal;  // PR_SET_PDEATHSIG
  bool close_other_fds = false;            // close every descriptor above stderr
  std::optional<ChildAccount> run_as;      // fails when root could be regained
  // Non-empty: the launched process stays as a shim, in the same group,
  // between the launcher and the program. It ignores SIGTERM, SIGINT and
  // SIGHUP (they are for the program), waits for the program, writes its
  // exit code (or 128 + signal) and a newline to this file (relative to
  // cwd: written as "<file>.tmp", fsynced, renamed) and exits with that
  // code; it dies with the program's group on SIGKILL. Launch returns the
  // shim's pid. So a process that is not the shim's parent (an agent
  // restarted since) still learns how the program ended. `run_as` applies
  // to the program only.
  std::string exit_code_file;
  StartFailure on_start_failure = StartFailure::kReturnError;
  std::string start_failure_message;  // kExitInChild only
};

class ProcessLauncher {
 public:
  virtual ~ProcessLauncher() = default;

  // The real launcher. Never destroyed.
  static ProcessLauncher* Default();

  // Starts the child described by `spec`; returns its pid (also its process
  // group id with kNewGroup / kNewSession). See the file comment.
  virtual Result<pid_t> Launch(const ProcessSpec& spec) = 0;
};

}  // namespace tessera

#endif  // TESSERA_COMMON_PROCESS_LAUNCHER_H_
