// Helpers shared by the agent tests: temp dirs, launches, polling.
#ifndef TESSERA_TESTS_AGENT_TEST_UTIL_H_
#define TESSERA_TESTS_AGENT_TEST_UTIL_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "api/agent_protocol.h"
#include "tests/common/temp_dir.h"

namespace tessera::agent::testing {

// A fresh directory under $TMPDIR, removed on destruction.
using ::tessera::testing::TempDir;

inline void WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// The bytes of a file, "" when it cannot be read.
inline std::string ReadFile(const std::filesystem::path& path) {
  return ::tessera::testing::Slurp(path);
}

// A launch of `/bin/sh -c script` with controller-style env.
inline api::WorkerLaunch ShellLaunch(api::WorkerKey key, const std::string& script) {
  api::WorkerLaunch l;
  l.key = key;
  l.argv = {"/bin/sh", "-c", script};
  l.env = {{"RANK", std::to_string(key.rank)},
           {"WORLD_SIZE", "2"},
           {"LOCAL_RANK", std::to_string(key.rank)},
           {"LOCAL_WORLD_SIZE", "2"},
           {"MASTER_ADDR", "127.0.0.1"},
           {"MASTER_PORT", "29500"},
           {"TESSERA_JOB_ID", std::to_string(key.job_id)},
           {"TESSERA_ATTEMPT", std::to_string(key.attempt)},
           {"TESSERA_CHECKPOINT_DIR", "/tmp/ckpt"}};
  l.plan = api::Json{{"layout", "data"}, {"rank", key.rank}};
  return l;
}

// Polls `done` every 10 ms for at most `timeout`.
inline bool Eventually(const std::function<bool()>& done,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// The text of a /proc file, "" when it cannot be read. A process may exit
// between the open and the read, which then fails with ESRCH: std::ifstream
// throws on that ("basic_filebuf::underflow error reading the file"), so plain
// read(2) is used.
inline std::string ReadProcFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      text.clear();
      break;
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

// True while `pid` exists and is not a zombie.
inline bool ProcessAlive(pid_t pid) {
  const std::string text = ReadProcFile("/proc/" + std::to_string(pid) + "/stat");
  if (text.empty()) return false;
  auto paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

// Pids of live (non-zombie) processes whose process group is `pgid`.
inline std::vector<pid_t> LiveMembersOfGroup(pid_t pgid) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string text = ReadProcFile((entry.path() / "stat").string());
    auto paren = text.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream fields(text.substr(paren + 2));
    std::string state, ppid, pgrp;
    fields >> state >> ppid >> pgrp;
    if (state != "Z" && pgrp == std::to_string(pgid)) out.push_back(std::stoi(name));
  }
  return out;
}

}  // namespace tessera::agent::testing

#endif  // TESSERA_TESTS_AGENT_TEST_UTIL_H_
