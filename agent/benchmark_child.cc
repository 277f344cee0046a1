#include "agent/benchmark_child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace tessera::agent {
namespace {

StatusCode CodeFromName(const std::string& name) {
  for (int c = 0; c <= static_cast<int>(StatusCode::kInternal); ++c) {
    if (StatusCodeName(static_cast<StatusCode>(c)) == name) return static_cast<StatusCode>(c);
  }
  return StatusCode::kInternal;
}

// The last non-empty line of `text`.
std::string LastLine(const std::string& text) {
  size_t end = text.find_last_not_of("\r\n");
  if (end == std::string::npos) return "";
  size_t begin = text.rfind('\n', end);
  return text.substr(begin == std::string::npos ? 0 : begin + 1,
                     end + 1 - (begin == std::string::npos ? 0 : begin + 1));
}

std::string Tail(const std::string& text, size_t max = 400) {
  return text.size() <= max ? text : "..." + text.substr(text.size() - max);
}

}  // namespace

void UsePciBusIdDeviceOrder() { ::setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", /*overwrite=*/1); }

std::string DefaultBenchmarkBinary() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "tessera-device-bench";
  return (self.parent_path() / "tessera-device-bench").string();
}

std::string FiguresToJsonLine(const BenchmarkFigures& f) {
  return nlohmann::json{{"tflops", f.tflops},
                        {"tflops_half", f.tflops_half},
                        {"tflops_fp16", f.tflops_fp16},
                        {"tflops_bf16", f.tflops_bf16},
                        {"mem_bandwidth_gbps", f.mem_bandwidth_gbps}}
      .dump();
}

std::string ErrorToJsonLine(const Status& error) {
  return nlohmann::json{
      {"error",
       {{"code", std::string(StatusCodeName(error.code()))}, {"message", error.message()}}}}
      .dump();
}

Result<BenchmarkFigures> ParseBenchmarkOutput(const std::string& output) {
  const std::string line = LastLine(output);
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return Internal("tessera-device-bench printed no result: " + Tail(output));
  }
  if (j.contains("error")) {
    const auto& e = j["error"];
    return Status(CodeFromName(e.value("code", "internal")), e.value("message", "unknown error"));
  }
  BenchmarkFigures f;
  try {
    f.tflops = j.at("tflops").get<double>();
    f.tflops_half = j.value("tflops_half", 0.0);
    f.tflops_fp16 = j.value("tflops_fp16", 0.0);
    f.tflops_bf16 = j.value("tflops_bf16", 0.0);
    f.mem_bandwidth_gbps = j.value("mem_bandwidth_gbps", 0.0);
  } catch (const std::exception& e) {
    return Internal(std::string("tessera-device-bench result unreadable: ") + e.what());
  }
  return f;
}

Result<BenchmarkFigures> RunBenchmarkChild(const BenchmarkChildOptions& options,
                                           const std::string& device) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Internal("pipe failed");
  ProcessSpec spec;
  spec.argv = {options.binary, "--device", device};
  spec.argv.insert(spec.argv.end(), options.args.begin(), options.args.end());
  spec.stdin_from = ChildStdio::Null();
  spec.stdout_to = ChildStdio::Fd(fds[1]);
  spec.stderr_to = ChildStdio::Fd(fds[1]);
  Result<pid_t> started = options.launcher->Launch(spec);
  ::close(fds[1]);
  if (!started.ok()) {
    ::close(fds[0]);
    return Status(StatusCode::kNotFound, started.status().message());
  }
  const pid_t pid = *started;

  std::string output;
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  bool timed_out = false;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child closed its output (it exited)
    output.append(buf, static_cast<size_t>(n));
    if (output.size() > (1u << 20)) output.erase(0, output.size() - (1u << 19));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return DeadlineExceeded("tessera-device-bench on " + device + " did not finish within " +
                            std::to_string(options.timeout.count() / 1000) + " s (killed)");
  }
  if (WIFSIGNALED(status)) {
    return Internal("tessera-device-bench on " + device + " died of signal " +
                    std::to_string(WTERMSIG(status)) + ": " + Tail(output));
  }
  return ParseBenchmarkOutput(output);
}

}  // namespace tessera::agent
