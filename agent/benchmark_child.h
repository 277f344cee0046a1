// BenchmarkChild: measures a device in a child process (tessera-device-bench),
// so the agent itself links no LibTorch and holds no CUDA context or cached GPU
// memory: the child's memory and its CUDA context go when it exits, and a
// benchmark that crashes or hangs (a broken driver) costs the agent only that
// device's figures, with the reason.
//
// Protocol: the child is run as `<binary> --device <device> [args...]`; its last
// line on stdout is one JSON object, either the figures
// {"tflops":..,"tflops_fp16":..,"tflops_bf16":..,"tflops_half":..,"mem_bandwidth_gbps":..}
// or {"error":{"code":"unavailable","message":"..."}} with a non-zero exit.
//
// Thread safety: any thread; each call runs its own child.
#ifndef TESSERA_AGENT_BENCHMARK_CHILD_H_
#define TESSERA_AGENT_BENCHMARK_CHILD_H_

#include <chrono>
#include <string>
#include <vector>

#include "agent/device_benchmark.h"
#include "agent/gloo_link_benchmark.h"
#include "common/process_launcher.h"
#include "common/status.h"

namespace tessera::agent {

struct BenchmarkChildOptions {
  std::string binary;             // path of tessera-device-bench
  std::vector<std::string> args;  // extra arguments after --device
  std::chrono::milliseconds timeout{std::chrono::minutes(3)};
  ProcessLauncher* launcher = ProcessLauncher::Default();  // starts the child; not owned
};

// The tessera-device-bench installed beside this process's executable.
std::string DefaultBenchmarkBinary();
// `name` beside this process's executable (`name` alone when that is unknown).
std::string BesideThisProgram(const std::string& name);

// What a child printed (stdout and stderr together, at most its last 1 MiB) and
// how it ended. Errors: kNotFound when it cannot be started (the launcher's
// message), kDeadlineExceeded when it outlives `timeout` (it is killed; `what`
// names it in the message).
struct ChildRun {
  std::string output;
  int wait_status = 0;  // as waitpid reports it
};
Result<ChildRun> RunChild(ProcessLauncher* launcher, const std::vector<std::string>& argv,
                          std::chrono::milliseconds timeout, const std::string& what);

// Measures builtin models' layer profiles on this node's GPUs with
// `tessera-worker profile --model M --batch 8 --fixed-batch 2 --device cuda:K`
// (the arguments tesserad profiles the CPU with, so the layers and image size
// match), in a child process as the benchmark is.
struct ProfileChildOptions {
  std::string worker_binary;  // tessera-worker
  std::chrono::milliseconds timeout{std::chrono::minutes(3)};
  ProcessLauncher* launcher = ProcessLauncher::Default();  // not owned
};
// The profile's JSON text. Errors: RunChild's; kInternal when the worker fails
// (its exit status and the end of its output) or prints no JSON object.
Result<std::string> RunProfileChild(const ProfileChildOptions& options, const std::string& device,
                                    const std::string& model);

// Runs the child and parses its figures. Errors: the child's own error
// (its code and message), kDeadlineExceeded when it outlives `timeout` (it is
// killed), kInternal when it dies by a signal or prints no JSON (with the end
// of what it printed), kNotFound when the binary cannot be run (the
// launcher's message: "cannot execute <binary>: <errno text>", or "fork
// failed: ...").
Result<BenchmarkFigures> RunBenchmarkChild(const BenchmarkChildOptions& options,
                                           const std::string& device);

// Runs `<binary> --gloo-link` (agent/gloo_link_benchmark.h) and parses its
// figures; errors as RunBenchmarkChild's.
Result<LinkFigures> RunGlooLinkChild(const BenchmarkChildOptions& options);

// The figures and errors as the child prints them (shared by both sides).
std::string FiguresToJsonLine(const BenchmarkFigures& figures);
std::string ErrorToJsonLine(const Status& error);
Result<BenchmarkFigures> ParseBenchmarkOutput(const std::string& output);
// {"bandwidth_bytes_per_s":..,"latency_s":..}; parsing also accepts the error line.
std::string LinkToJsonLine(const LinkFigures& link);
Result<LinkFigures> ParseLinkOutput(const std::string& output);

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_BENCHMARK_CHILD_H_
