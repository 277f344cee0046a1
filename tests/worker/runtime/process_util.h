// Helpers of the worker runtime tests that run real processes and real
// rendezvous: a free loopback port, a rank's torchrun variables, spawning a
// worker with a clean torchrun environment, and waiting for it with a deadline.
#ifndef TESSERA_TESTS_WORKER_RUNTIME_PROCESS_UTIL_H_
#define TESSERA_TESTS_WORKER_RUNTIME_PROCESS_UTIL_H_

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

extern "C" char** environ;

namespace tessera::worker::testing {

// A loopback TCP port that was free a moment ago.
inline int FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

// The torchrun variables of rank `rank` of `world` ranks on this host, with
// the rendezvous at 127.0.0.1:`port`.
inline std::map<std::string, std::string> TorchrunEnv(int rank, int world, int port) {
  return {{"RANK", std::to_string(rank)},       {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_RANK", std::to_string(rank)}, {"LOCAL_WORLD_SIZE", std::to_string(world)},
          {"MASTER_ADDR", "127.0.0.1"},         {"MASTER_PORT", std::to_string(port)}};
}

// Starts args[0] (an absolute path) with this process's environment minus
// the torchrun and TESSERA_ variables, plus `env`; stdout and stderr are
// appended to log_path. Returns the child's pid.
inline pid_t Spawn(const std::vector<std::string>& args,
                   const std::map<std::string, std::string>& env, const std::string& log_path) {
  static const char* kOwned[] = {"RANK=",        "WORLD_SIZE=",  "LOCAL_RANK=", "LOCAL_WORLD_SIZE=",
                                 "MASTER_ADDR=", "MASTER_PORT=", "TESSERA_"};
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    bool owned = false;
    for (const char* p : kOwned) owned = owned || kv.rfind(p, 0) == 0;
    if (!owned) env_strings.push_back(kv);
  }
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    std::vector<char*> argv, envp;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  return pid;
}

// Exit code, 128 + signal when killed, -1 on timeout (the process is killed).
inline int WaitExit(pid_t pid, int timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (true) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      return -1;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace tessera::worker::testing

#endif  // TESSERA_TESTS_WORKER_RUNTIME_PROCESS_UTIL_H_
