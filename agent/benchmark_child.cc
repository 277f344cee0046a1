#include "agent/benchmark_child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
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

std::string BesideThisProgram(const std::string& name) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return name;
  return (self.parent_path() / name).string();
}

std::string DefaultBenchmarkBinary() { return BesideThisProgram("tessera-device-bench"); }

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

namespace {

// The child's last line as a JSON object; its error line as the error.
Result<nlohmann::json> ResultLine(const std::string& output) {
  const std::string line = LastLine(output);
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return Internal("tessera-device-bench printed no result: " + Tail(output));
  }
  if (j.contains("error")) {
    const auto& e = j["error"];
    return Status(CodeFromName(e.value("code", "internal")), e.value("message", "unknown error"));
  }
  return j;
}

}  // namespace

std::string LinkToJsonLine(const LinkFigures& link) {
  return nlohmann::json{{"bandwidth_bytes_per_s", link.bandwidth_bytes_per_s},
                        {"latency_s", link.latency_s},
                        {"cpu_per_hop_s", link.cpu_per_hop_s}}
      .dump();
}

Result<LinkFigures> ParseLinkOutput(const std::string& output) {
  TESSERA_ASSIGN_OR_RETURN(nlohmann::json j, ResultLine(output));
  LinkFigures f;
  try {
    f.bandwidth_bytes_per_s = j.at("bandwidth_bytes_per_s").get<double>();
    f.latency_s = j.at("latency_s").get<double>();
    f.cpu_per_hop_s = j.value("cpu_per_hop_s", 0.0);
  } catch (const std::exception& e) {
    return Internal(std::string("tessera-device-bench link result unreadable: ") + e.what());
  }
  if (!(f.bandwidth_bytes_per_s > 0) || !(f.latency_s >= 0) || !std::isfinite(f.latency_s) ||
      !std::isfinite(f.bandwidth_bytes_per_s) || !(f.cpu_per_hop_s >= 0) ||
      !std::isfinite(f.cpu_per_hop_s)) {
    return Internal("tessera-device-bench link result out of range: " + LastLine(output));
  }
  return f;
}

Result<BenchmarkFigures> ParseBenchmarkOutput(const std::string& output) {
  TESSERA_ASSIGN_OR_RETURN(nlohmann::json j, ResultLine(output));
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

Result<ChildRun> RunChild(ProcessLauncher* launcher, const std::vector<std::string>& argv,
                          std::chrono::milliseconds timeout, const std::string& what) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Internal("pipe failed");
  ProcessSpec spec;
  spec.argv = argv;
  spec.stdin_from = ChildStdio::Null();
  spec.stdout_to = ChildStdio::Fd(fds[1]);
  spec.stderr_to = ChildStdio::Fd(fds[1]);
  Result<pid_t> started = launcher->Launch(spec);
  ::close(fds[1]);
  if (!started.ok()) {
    ::close(fds[0]);
    return Status(StatusCode::kNotFound, started.status().message());
  }
  const pid_t pid = *started;

  ChildRun run;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
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
    run.output.append(buf, static_cast<size_t>(n));
    if (run.output.size() > (1u << 20)) run.output.erase(0, run.output.size() - (1u << 19));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  while (::waitpid(pid, &run.wait_status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return DeadlineExceeded(what + " did not finish within " +
                            std::to_string(timeout.count() / 1000) + " s (killed)");
  }
  return run;
}

namespace {

// What a tessera-device-bench run printed, unless a signal ended it (a run
// that exits prints its result, or its error, for the caller to parse).
Result<std::string> BenchOutput(const BenchmarkChildOptions& options,
                                const std::vector<std::string>& argv, const std::string& what) {
  TESSERA_ASSIGN_OR_RETURN(ChildRun run, RunChild(options.launcher, argv, options.timeout, what));
  if (WIFSIGNALED(run.wait_status)) {
    return Internal(what + " died of signal " + std::to_string(WTERMSIG(run.wait_status)) + ": " +
                    Tail(run.output));
  }
  return run.output;
}

}  // namespace

Result<BenchmarkFigures> RunBenchmarkChild(const BenchmarkChildOptions& options,
                                           const std::string& device) {
  std::vector<std::string> argv = {options.binary, "--device", device};
  argv.insert(argv.end(), options.args.begin(), options.args.end());
  TESSERA_ASSIGN_OR_RETURN(std::string output,
                           BenchOutput(options, argv, "tessera-device-bench on " + device));
  return ParseBenchmarkOutput(output);
}

Result<LinkFigures> RunGlooLinkChild(const BenchmarkChildOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(std::string output, BenchOutput(options, {options.binary, "--gloo-link"},
                                                           "tessera-device-bench --gloo-link"));
  return ParseLinkOutput(output);
}

Result<std::string> RunProfileChild(const ProfileChildOptions& options, const std::string& device,
                                    const std::string& model) {
  const std::string what = "tessera-worker profile --model " + model + " on " + device;
  TESSERA_ASSIGN_OR_RETURN(
      ChildRun run, RunChild(options.launcher,
                             {options.worker_binary, "profile", "--model", model, "--batch", "8",
                              "--fixed-batch", "2", "--device", device},
                             options.timeout, what));
  if (!WIFEXITED(run.wait_status) || WEXITSTATUS(run.wait_status) != 0) {
    const std::string how =
        WIFSIGNALED(run.wait_status)
            ? "died of signal " + std::to_string(WTERMSIG(run.wait_status))
            : "exited with status " + std::to_string(WEXITSTATUS(run.wait_status));
    return Internal(what + " " + how + ": " + Tail(run.output));
  }
  // The profile is the JSON object that ends the output (log lines come before it).
  size_t from = run.output.rfind("\n{");
  if (from != std::string::npos) {
    ++from;
  } else if (run.output.rfind('{', 0) == 0) {
    from = 0;
  } else {
    return Internal(what + " printed no profile: " + Tail(run.output));
  }
  nlohmann::json j =
      nlohmann::json::parse(run.output.substr(from), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("layers")) {
    return Internal(what + " printed no profile: " + Tail(run.output));
  }
  return j.dump();
}

}  // namespace tessera::agent
