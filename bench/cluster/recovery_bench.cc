// recovery_bench: how fast the real cluster starts a job and recovers from a
// node loss, with the daemon's and agents' default settings (1 s heartbeats,
// 3 s dead timeout). Each repetition starts tesserad and three agents on
// loopback, submits a 3-rank job of the checkpointing test worker, then
// kill -9s one agent holding a rank together with its workers.
//
// Measured (from the job's events and the submit/kill wall times):
//   submit -> running        the job's "running" event after the POST
//   kill -> detected         the "recovering" event after the kill
//   kill -> running again    the second "running" event after the kill
// Usage: recovery_bench [--reps 5] --worker PATH_TO_checkpointing_worker.sh
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "tests/integration/harness.h"

using namespace std::chrono_literals;
using tessera::testing::Cluster;
using tessera::testing::WaitFor;
namespace fs = std::filesystem;

namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Sample {
  double submit_to_running = -1, kill_to_detected = -1, kill_to_running = -1;
};

Sample RunOnce(int rep, const std::string& worker) {
  const char* fast2 =
      "devices:\n  - {name: \"A (emulated)\", memory: 16GiB, relative_speed: 0.5}\n"
      "  - {name: \"A (emulated)\", memory: 16GiB, relative_speed: 0.5}\n";
  Cluster cluster("recovery-bench-" + std::to_string(rep), /*fast=*/false);
  cluster.StartController();
  for (const char* n : {"boxa", "boxb", "boxc"}) cluster.StartAgent(n, fast2);
  Sample s;
  if (!WaitFor([&] { return cluster.HealthyNodes() == 3; }, 30s)) return s;
  cluster.PostJson("/api/v1/entrypoints", {{"name", "cmd:ckpt"}, {"command", worker}});
  // Let the agents settle into long polls before timing.
  std::this_thread::sleep_for(1500ms);
  const int64_t submitted = NowMs();
  int status = 0;
  auto job = cluster.PostJson("/api/v1/jobs",
                              {{"name", "bench"},
                               {"entrypoint", "cmd:ckpt"},
                               {"args", {"600", "0.1"}},
                               {"global_batch", 12},
                               {"steps", 600},
                               {"min_devices", 3},
                               {"max_devices", 3},
                               {"max_attempts", 5}},
                              &status);
  if (status != 201) return s;
  const int64_t id = job["id"].get<int64_t>();
  auto event_time = [&](const std::string& to, int nth) -> int64_t {
    int seen = 0;
    for (const auto& e : cluster.Events(id)) {
      if (e.to_state == to && ++seen == nth) return e.ts_ms;
    }
    return -1;
  };
  if (!WaitFor([&] { return event_time("running", 1) > 0; }, 30s)) return s;
  s.submit_to_running = (event_time("running", 1) - submitted) / 1000.0;

  std::this_thread::sleep_for(1000ms);
  auto plan = cluster.GetJson("/api/v1/jobs/" + std::to_string(id))["plan"];
  std::string victim = plan["replicas"][0]["stages"][0]["devices"][0].get<std::string>();
  victim = victim.substr(0, victim.find(':'));
  const int64_t killed = NowMs();
  cluster.StopAgent(victim, SIGKILL);
  tessera::testing::KillProcessesUnder(cluster.dir() / ("agent-" + victim));
  if (!WaitFor([&] { return event_time("running", 2) > 0; }, 60s)) return s;
  s.kill_to_detected = (event_time("recovering", 1) - killed) / 1000.0;
  s.kill_to_running = (event_time("running", 2) - killed) / 1000.0;
  return s;
}

void Row(const char* what, std::vector<double> v, double target) {
  std::sort(v.begin(), v.end());
  double p50 = v.empty() ? -1 : v[v.size() / 2];
  double max = v.empty() ? -1 : v.back();
  std::printf("| %-26s | %5zu | %7.2f | %7.2f | %s |\n", what, v.size(), p50, max,
              target > 0 ? (max <= target ? "met" : "missed") : "-");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"recovery_bench"};
  int reps = 5;
  std::string worker;
  app.add_option("--reps", reps);
  app.add_option("--worker", worker)->required()->check(CLI::ExistingFile);
  CLI11_PARSE(app, argc, argv);
  std::vector<double> a, b, c;
  for (int r = 0; r < reps; ++r) {
    Sample s = RunOnce(r, fs::absolute(worker).string());
    std::fprintf(stderr,
                 "rep %d: submit->running %.2f s, kill->detected %.2f s, kill->running %.2f s\n", r,
                 s.submit_to_running, s.kill_to_detected, s.kill_to_running);
    if (s.submit_to_running >= 0) a.push_back(s.submit_to_running);
    if (s.kill_to_detected >= 0) b.push_back(s.kill_to_detected);
    if (s.kill_to_running >= 0) c.push_back(s.kill_to_running);
  }
  std::printf("| measure (s) | n | p50 | max | target |\n| --- | --- | --- | --- | --- |\n");
  Row("submit -> all ranks running", a, 0.5);
  Row("node killed -> detected", b, 0);
  Row("node killed -> running again", c, 5.0);
  return (a.size() == static_cast<size_t>(reps) && c.size() == static_cast<size_t>(reps)) ? 0 : 1;
}
