#include "common/process_launcher.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace tessera {
namespace {

Status Errno(const std::string& what, int err) {
  return Internal(what + ": " + std::strerror(err));
}

// Descriptors opened by the parent for the child; closed when Launch returns.
class ParentFds {
 public:
  ~ParentFds() {
    for (int fd : fds_) ::close(fd);
  }
  void Add(int fd) { fds_.push_back(fd); }

 private:
  std::vector<int> fds_;
};

// The descriptor the child dup's onto `target` (or -1: leave it), opened now.
Result<int> OpenStdio(const ChildStdio& stdio, int target, ParentFds& opened) {
  switch (stdio.kind) {
    case ChildStdio::Kind::kInherit:
      return -1;
    case ChildStdio::Kind::kFd:
      return stdio.fd;
    case ChildStdio::Kind::kNull: {
      const int fd = ::open("/dev/null", (target == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
      if (fd < 0) return Errno("cannot prepare launch", errno);
      opened.Add(fd);
      return fd;
    }
    case ChildStdio::Kind::kAppendFile: {
      const int fd = ::open(stdio.path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                            static_cast<mode_t>(stdio.mode));
      if (fd < 0) return Errno("cannot open " + stdio.path, errno);
      opened.Add(fd);
      return fd;
    }
  }
  return -1;
}

// Writes `code` and a newline to `file` atomically: async-signal-safe (the
// shim runs between fork and exit of a multithreaded parent).
void WriteExitCodeFile(const char* file, const char* tmp, int code) {
  char text[16];
  char digits[12];
  int len = 0;
  int v = code;
  do {
    digits[len++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0 && len < 11);
  for (int i = 0; i < len; ++i) text[i] = digits[len - 1 - i];
  text[len] = '\n';
  const int fd = ::open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  ssize_t ignored = ::write(fd, text, static_cast<size_t>(len + 1));
  (void)ignored;
  ::fsync(fd);
  ::close(fd);
  ::rename(tmp, file);
}

class PosixProcessLauncher final : public ProcessLauncher {
 public:
  Result<pid_t> Launch(const ProcessSpec& spec) override {
    if (spec.argv.empty() || spec.argv[0].empty()) {
      return InvalidArgument("no program to run", "argv[0]");
    }
    // Everything the child needs, prepared before the fork.
    std::vector<std::string> argv_strings = spec.argv;
    std::vector<char*> argv;
    for (auto& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_strings = spec.env.value_or(std::vector<std::string>{});
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    char* const* const child_env = spec.env ? envp.data() : environ;
    const std::string exit_file = spec.exit_code_file;
    const std::string exit_tmp = exit_file.empty() ? "" : exit_file + ".tmp";
    const std::vector<gid_t> groups = spec.run_as ? spec.run_as->groups : std::vector<gid_t>{};

    ParentFds opened;
    int stdio[3];
    const ChildStdio* wanted[3] = {&spec.stdin_from, &spec.stdout_to, &spec.stderr_to};
    for (int i = 0; i < 3; ++i) {
      TESSERA_ASSIGN_OR_RETURN(stdio[i], OpenStdio(*wanted[i], i, opened));
    }
    const bool report = spec.on_start_failure == StartFailure::kReturnError;
    int err_pipe[2] = {-1, -1};
    if (report && ::pipe2(err_pipe, O_CLOEXEC) != 0) {
      return Errno("cannot prepare launch", errno);
    }
    const pid_t parent = ::getpid();

    const pid_t pid = ::fork();
    if (pid == 0) {
      RunChild(spec, argv.data(), child_env, stdio, err_pipe[1], parent, exit_file.c_str(),
               exit_tmp.c_str(), groups);  // never returns
    }
    const int fork_errno = errno;
    if (report) ::close(err_pipe[1]);
    if (pid < 0) {
      if (report) ::close(err_pipe[0]);
      return Errno("fork failed", fork_errno);
    }
    // Also in the child: the group exists whichever runs first.
    if (spec.group == ChildProcessGroup::kNewGroup) ::setpgid(pid, pid);
    if (!report) return pid;
    int child_errno = 0;
    ssize_t n;
    do {
      n = ::read(err_pipe[0], &child_errno, sizeof(child_errno));
    } while (n < 0 && errno == EINTR);
    ::close(err_pipe[0]);
    if (n > 0) {  // the child could not start the program and has exited
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return Errno("cannot execute " + spec.argv[0], child_errno);
    }
    return pid;
  }

 private:
  // The child's side: only async-signal-safe calls.
  [[noreturn]] static void RunChild(const ProcessSpec& spec, char* const* argv, char* const* envp,
                                    const int stdio[3], int err_fd, pid_t parent,
                                    const char* exit_file, const char* exit_tmp,
                                    const std::vector<gid_t>& groups) {
    auto fail = [&](int err) {
      if (err_fd >= 0) {
        ssize_t ignored = ::write(err_fd, &err, sizeof(err));
        (void)ignored;
      } else if (!spec.start_failure_message.empty()) {
        ssize_t ignored =
            ::write(2, spec.start_failure_message.data(), spec.start_failure_message.size());
        (void)ignored;
      }
      ::_exit(127);
    };
    if (spec.group == ChildProcessGroup::kNewSession) ::setsid();
    if (spec.group == ChildProcessGroup::kNewGroup) ::setpgid(0, 0);
    if (spec.signal_mask) ::sigprocmask(SIG_SETMASK, &*spec.signal_mask, nullptr);
    if (spec.default_signal_handlers) {
      for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
    }
    if (spec.parent_death_signal) {
      ::prctl(PR_SET_PDEATHSIG, *spec.parent_death_signal);
      if (::getppid() != parent) ::_exit(127);  // it died before prctl
    }
    for (int target = 0; target < 3; ++target) {
      if (stdio[target] >= 0 && ::dup2(stdio[target], target) < 0) fail(errno);
    }
    if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) fail(errno);
    if (spec.close_other_fds) {
      if (err_fd > 3) ::close_range(3, static_cast<unsigned>(err_fd - 1), 0);
      ::close_range(static_cast<unsigned>(err_fd < 3 ? 3 : err_fd + 1), ~0U, 0);
    }
    if (exit_file[0] != '\0') {
      const pid_t program = ::fork();
      if (program < 0) fail(errno);
      if (program > 0) {
        // The shim: waits for the program and records how it ended.
        ::signal(SIGTERM, SIG_IGN);
        ::signal(SIGINT, SIG_IGN);
        ::signal(SIGHUP, SIG_IGN);
        if (err_fd >= 0) ::close(err_fd);
        int status = 0;
        while (::waitpid(program, &status, 0) < 0 && errno == EINTR) {
        }
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        WriteExitCodeFile(exit_file, exit_tmp, code);
        ::_exit(code);
      }
    }
    if (spec.run_as) {
      const ChildAccount& a = *spec.run_as;
      errno = 0;
      if (::setgroups(groups.size(), groups.data()) != 0 || ::setgid(a.gid) != 0 ||
          ::setuid(a.uid) != 0 || ::setuid(0) == 0) {
        fail(errno == 0 ? EPERM : errno);
      }
    }
    ::execve(argv[0], argv, envp);
    fail(errno);
    ::_exit(127);  // not reached
  }
};

}  // namespace

ProcessLauncher* ProcessLauncher::Default() {
  static ProcessLauncher* launcher = new PosixProcessLauncher();
  return launcher;
}

}  // namespace tessera
