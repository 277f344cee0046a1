// recovery_bench: how fast the real cluster starts a job and recovers from a
// node loss, with the daemon's and agents' default settings (1 s heartbeats,
// 3 s dead timeout). Each repetition starts tesserad and three agents on
// loopback, submits a 3-rank job, waits until it trains (and, with the real
// worker, until it wrote a checkpoint), then kill -9s the agent holding rank 0
// together with its workers.
//
// Workers:
//   --worker PATH   the checkpointing shell-script test worker (cmd: entrypoint):
//                   measures the control plane alone
//   --model NAME    the real tessera-worker (builtin:NAME, data parallel;
//                   the job spec's defaults except steps and
//                   checkpoint_every_s): measures what a user waits
//
// Topologies (--topology, real worker):
//   three-nodes     three emulated devices, one a node; rank 0's node is
//                   killed (the default)
//   demo-lab        examples/demo-lab's three nodes (two, one and two
//                   devices), global batch 16 over 4 or 5 devices (so at least
//                   two nodes); a node that holds ranks but not
//                   rank 0 is killed, so rank 0's node survives and hosts the
//                   next attempt's rendezvous too
// --load N keeps N threads of this process busy from submit to the end of the
// repetition (a lab box that also serves files).
//
// Measured (from the job's events, its metrics history and the kill time).
// The real worker's survivors re-form in the same attempt (worker/runtime/reform.h)
// where they can; otherwise the attempt is restarted from the checkpoint:
//   submit -> running        the job's "running" event after the POST
//   kill -> detected         re-formed: the first survivor's "peer_lost" progress
//                            line (its collective failed; the worker's clock);
//                            restarted: the "recovering" event after the kill
//   kill -> running again    the second "running" event after the kill (the
//                            re-forming, or the next attempt's ranks running)
//   kill -> progressing      the first step past those completed before the
//                            kill (the worker's own timestamp; real worker only)
//   steps redone             the newest step completed before the kill minus
//                            the step training went on from (real worker only)
//   failed attempts          attempts after the kill that ended without
//                            progress (each a "recovering" event beyond the first)
// Usage: recovery_bench [--reps 5] (--worker PATH_TO_checkpointing_worker.sh |
//                        --model colorize-unet [--checkpoint-every-s 2]
//                        [--topology three-nodes|demo-lab] [--load N])
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "tests/integration/harness.h"

using namespace std::chrono_literals;
using tessera::testing::BinaryPath;
using tessera::testing::Cluster;
using tessera::testing::Process;
using tessera::testing::ReadText;
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
  double kill_to_progress = -1;
  int64_t steps_redone = -1;
  int64_t failed_attempts = -1;
  std::string detected_by;
};

struct Setup {
  std::string worker;  // script worker (cmd:ckpt), or empty
  std::string model;   // builtin model of the real worker, or empty
  int checkpoint_every_s = 2;
  std::string topology = "three-nodes";
  int load = 0;
};

// N threads that spin until destroyed.
class CpuLoad {
 public:
  explicit CpuLoad(int n) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this] {
        volatile uint64_t x = 0;
        while (!stop_.load(std::memory_order_relaxed)) x = x + 1;
      });
    }
  }
  ~CpuLoad() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// Every metrics point of one attempt of the job (all pages).
std::vector<tessera::api::Json> Points(Cluster& cluster, int64_t id, int64_t attempt) {
  std::vector<tessera::api::Json> out;
  std::string since;
  for (int page = 0; page < 100; ++page) {
    auto j = cluster.GetJson("/api/v1/jobs/" + std::to_string(id) +
                             "/metrics?limit=5000&attempt=" + std::to_string(attempt) + since);
    if (!j.contains("points")) break;
    for (const auto& p : j["points"]) out.push_back(p);
    if (!j.contains("next_since") || j["next_since"].is_null()) break;
    since = "&since=" + std::to_string(j["next_since"].get<int64_t>());
  }
  return out;
}

// The survivors' "peer_lost" progress lines (worker/runtime/reform.h) under
// the agents' rank folders: {held_step, ts_ms} each.
std::vector<tessera::api::Json> PeerLostLines(const fs::path& root) {
  std::vector<tessera::api::Json> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().filename() != "progress.jsonl") continue;
    std::ifstream in(it->path());
    std::string line;
    while (std::getline(in, line)) {
      auto j = tessera::api::Json::parse(line, nullptr, false);
      if (j.is_object() && j.value("event", "") == "peer_lost") out.push_back(j);
    }
  }
  return out;
}

// The rest of a sample whose survivors re-formed in attempt `attempt`.
Sample Reformed(Cluster& cluster, int64_t id, int64_t attempt, int64_t killed, Sample s) {
  std::vector<tessera::api::Json> lost;
  if (!WaitFor([&] { return !(lost = PeerLostLines(cluster.dir())).empty(); }, 30s)) {
    std::fprintf(stderr, "no survivor said it lost a peer\n");
    return s;
  }
  int64_t detected = INT64_MAX, held = -1;
  for (const auto& l : lost) {
    detected = std::min<int64_t>(detected, l.value("ts_ms", INT64_MAX));
    held = std::max<int64_t>(held, l.value("held_step", int64_t{-1}));
  }
  s.kill_to_detected = (detected - killed) / 1000.0;
  s.detected_by = "a survivor's collective failed";
  int64_t first_ts = INT64_MAX, first_step = INT64_MAX;
  if (!WaitFor(
          [&] {
            for (const auto& p : Points(cluster, id, attempt)) {
              if (p.value("step", int64_t{0}) <= held || p.value("ts_ms", int64_t{0}) < killed) {
                continue;
              }
              first_ts = std::min<int64_t>(first_ts, p.value("ts_ms", INT64_MAX));
              first_step = std::min<int64_t>(first_step, p.value("step", INT64_MAX));
            }
            return first_ts != INT64_MAX;
          },
          60s)) {
    std::fprintf(stderr, "no step past %lld after re-forming\n", static_cast<long long>(held));
    return s;
  }
  // Steps done again: those the re-formed world reported at or below `held`.
  int64_t redone = 0;
  std::set<int64_t> again;
  for (const auto& p : Points(cluster, id, attempt)) {
    const int64_t step = p.value("step", int64_t{0});
    if (p.value("ts_ms", int64_t{0}) > detected && step <= held) again.insert(step);
  }
  redone = static_cast<int64_t>(again.size());
  s.kill_to_progress = (first_ts - killed) / 1000.0;
  s.steps_redone = redone;
  s.failed_attempts = 0;
  return s;
}

Sample RunOnce(int rep, const Setup& setup) {
  const bool real = !setup.model.empty();
  Cluster cluster("recovery-bench-" + std::to_string(rep), /*fast=*/false);
  fs::path images = cluster.dir() / "images";
  if (real) {
    Process gen({BinaryPath("tessera-worker"), "gen-images", "--out", images.string(), "--count",
                 "96", "--size", "64"},
                {}, cluster.dir() / "gen-images.log");
    if (gen.Wait(60s) != 0) return {};
    cluster.StartController("worker_binary: " + BinaryPath("tessera-worker") + "\n");
    if (setup.topology == "demo-lab") {
      const fs::path lab = fs::path(TESSERA_SOURCE_DIR) / "examples" / "demo-lab";
      for (const char* n : {"boxa", "boxb", "boxc"}) {
        cluster.StartAgent(n, ReadText(lab / (std::string(n) + ".yaml")));
      }
    } else {
      // Three emulated devices that together fit this host's cores.
      const char* one =
          "devices:\n  - {name: \"A (emulated)\", memory: 16GiB, relative_speed: 0.5}\n";
      for (const char* n : {"boxa", "boxb", "boxc"}) cluster.StartAgent(n, one);
    }
  } else {
    const char* fast2 =
        "devices:\n  - {name: \"A (emulated)\", memory: 16GiB, relative_speed: 0.5}\n"
        "  - {name: \"A (emulated)\", memory: 16GiB, relative_speed: 0.5}\n";
    cluster.StartController();
    for (const char* n : {"boxa", "boxb", "boxc"}) cluster.StartAgent(n, fast2);
  }
  Sample s;
  if (!WaitFor([&] { return cluster.HealthyNodes() == 3; }, 30s)) return s;
  tessera::api::Json spec;
  const bool demo_lab = setup.topology == "demo-lab";
  if (real) {
    spec = {{"name", "bench"},
            {"entrypoint", "builtin:" + setup.model},
            {"dataset", images.string()},
            {"global_batch", demo_lab ? 16 : 12},
            {"steps", 100000},
            {"checkpoint_every_s", setup.checkpoint_every_s},
            {"min_devices", demo_lab ? 4 : 2},
            {"max_devices", demo_lab ? 5 : 3},
            {"layout", "data"},
            {"max_attempts", 5}};
  } else {
    cluster.PostJson("/api/v1/entrypoints", {{"name", "cmd:ckpt"}, {"command", setup.worker}});
    spec = {{"name", "bench"},        {"entrypoint", "cmd:ckpt"},
            {"args", {"600", "0.1"}}, {"global_batch", 12},
            {"steps", 600},           {"min_devices", 3},
            {"max_devices", 3},       {"max_attempts", 5}};
  }
  // Let the agents settle into long polls before timing.
  std::this_thread::sleep_for(1500ms);
  CpuLoad load(setup.load);
  int64_t submitted = NowMs();
  int status = 0;
  auto job = cluster.PostJson("/api/v1/jobs", spec, &status);
  if (status != 201) {
    std::fprintf(stderr, "submit: %d %s\n", status, job.dump().c_str());
    return s;
  }
  const int64_t id = job["id"].get<int64_t>();
  const std::string path = "/api/v1/jobs/" + std::to_string(id);
  auto event = [&](const std::string& to, int nth) -> std::optional<tessera::api::Event> {
    int seen = 0;
    for (const auto& e : cluster.Events(id)) {
      if (e.to_state == to && ++seen == nth) return e;
    }
    return std::nullopt;
  };
  auto event_time = [&](const std::string& to, int nth) -> int64_t {
    auto e = event(to, nth);
    return e ? e->ts_ms : -1;
  };
  if (real) {
    // The first run profiles the builtin models before planning: not timed.
    if (!WaitFor([&] { return event_time("planned", 1) > 0; }, 600s)) return s;
    submitted = event_time("planned", 1);
  }
  if (!WaitFor([&] { return event_time("running", 1) > 0; }, 60s)) {
    std::fprintf(stderr, "not running: %s\n", cluster.GetJson(path).dump().c_str());
    return s;
  }
  s.submit_to_running = (event_time("running", 1) - submitted) / 1000.0;

  int64_t attempt = 1;
  if (real) {
    // Train past a checkpoint, then a little more.
    const fs::path ckpt =
        cluster.dir() / "controller" / "checkpoints" / ("job-" + std::to_string(id));
    auto has_checkpoint = [&] {
      std::error_code ec;
      for (auto it = fs::directory_iterator(ckpt, ec); !ec && it != fs::directory_iterator();
           it.increment(ec)) {
        if (fs::exists(it->path() / "manifest.json")) return true;
      }
      return false;
    };
    if (!WaitFor(has_checkpoint, 120s)) {
      std::fprintf(stderr, "no checkpoint in %s\n", ckpt.c_str());
      return s;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(setup.checkpoint_every_s * 500));
    attempt = cluster.GetJson(path).value("attempt", int64_t{1});
  } else {
    std::this_thread::sleep_for(1000ms);
  }
  auto plan = cluster.GetJson(path)["plan"];
  auto node_of = [](const tessera::api::Json& device) {
    std::string d = device.get<std::string>();
    return d.substr(0, d.find(':'));
  };
  const std::string rank0_node = node_of(plan["replicas"][0]["stages"][0]["devices"][0]);
  std::string victim = rank0_node;
  if (demo_lab) {
    // The first node in rank order other than rank 0's.
    for (const auto& replica : plan["replicas"]) {
      for (const auto& stage : replica["stages"]) {
        std::string node = node_of(stage["devices"][0]);
        if (victim == rank0_node && node != rank0_node) victim = node;
      }
    }
    if (victim == rank0_node) {
      std::fprintf(stderr, "every rank is on %s: nothing to kill\n", victim.c_str());
      return s;
    }
  }
  const int64_t killed = NowMs();
  cluster.StopAgent(victim, SIGKILL);
  tessera::testing::KillProcessesUnder(cluster.dir() / ("agent-" + victim));
  if (!WaitFor([&] { return event_time("running", 2) > 0; }, 60s)) {
    std::fprintf(stderr, "not running again: %s\n", cluster.GetJson(path).dump().c_str());
    return s;
  }
  auto detected = event("recovering", 1);
  s.kill_to_detected = detected ? (detected->ts_ms - killed) / 1000.0 : -1;
  s.detected_by = detected ? detected->reason : "";
  s.kill_to_running = (event_time("running", 2) - killed) / 1000.0;
  if (!real) return s;
  if (!event("recovering", 1)) return Reformed(cluster, id, attempt, killed, s);
  const int64_t next = cluster.GetJson(path).value("attempt", attempt + 1);
  std::vector<tessera::api::Json> after;
  if (!WaitFor(
          [&] {
            after = Points(cluster, id, next);
            return !after.empty();
          },
          60s)) {
    std::fprintf(stderr, "no progress of attempt %lld\n", static_cast<long long>(next));
    return s;
  }
  int64_t first_ts = INT64_MAX, first_step = INT64_MAX, last_step = -1;
  for (const auto& p : after) {
    first_ts = std::min<int64_t>(first_ts, p.value("ts_ms", INT64_MAX));
    first_step = std::min<int64_t>(first_step, p.value("step", INT64_MAX));
  }
  for (const auto& p : Points(cluster, id, attempt)) {
    last_step = std::max<int64_t>(last_step, p.value("step", -1));
  }
  s.kill_to_progress = (first_ts - killed) / 1000.0;
  s.steps_redone = last_step >= 0 ? last_step - (first_step - 1) : -1;
  int recovering = 0;
  for (const auto& e : cluster.Events(id)) recovering += e.to_state == "recovering" ? 1 : 0;
  s.failed_attempts = std::max(0, recovering - 1);
  return s;
}

// target: the largest value met; none for a figure without one.
void Row(const char* what, std::vector<double> v, std::optional<double> target) {
  std::sort(v.begin(), v.end());
  double p50 = v.empty() ? -1 : v[v.size() / 2];
  double max = v.empty() ? -1 : v.back();
  std::printf("| %-30s | %5zu | %7.2f | %7.2f | %s |\n", what, v.size(), p50, max,
              !target ? "-" : (!v.empty() && max <= *target ? "met" : "missed"));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"recovery_bench"};
  int reps = 5;
  Setup setup;
  app.add_option("--reps", reps);
  auto* w = app.add_option("--worker", setup.worker)->check(CLI::ExistingFile);
  auto* m = app.add_option("--model", setup.model, "real tessera-worker, builtin:MODEL");
  app.add_option("--checkpoint-every-s", setup.checkpoint_every_s)->check(CLI::PositiveNumber);
  app.add_option("--topology", setup.topology, "three-nodes or demo-lab (real worker)")
      ->check(CLI::IsMember({"three-nodes", "demo-lab"}));
  app.add_option("--load", setup.load, "threads kept busy during each repetition")
      ->check(CLI::NonNegativeNumber);
  w->excludes(m);
  m->excludes(w);
  CLI11_PARSE(app, argc, argv);
  if (setup.worker.empty() == setup.model.empty()) {
    std::fprintf(stderr, "give --worker or --model\n");
    return 2;
  }
  if (!setup.worker.empty()) setup.worker = fs::absolute(setup.worker).string();
  if (setup.topology != "three-nodes" && setup.model.empty()) {
    std::fprintf(stderr, "--topology %s needs --model\n", setup.topology.c_str());
    return 2;
  }
  const bool real = !setup.model.empty();
  std::vector<double> a, b, c, d, e, f;
  for (int r = 0; r < reps; ++r) {
    Sample s = RunOnce(r, setup);
    std::fprintf(stderr,
                 "rep %d: submit->running %.2f s, kill->detected %.2f s (%s), kill->running %.2f "
                 "s, kill->progress %.2f s, steps redone %lld, failed attempts %lld\n",
                 r, s.submit_to_running, s.kill_to_detected, s.detected_by.c_str(),
                 s.kill_to_running, s.kill_to_progress, static_cast<long long>(s.steps_redone),
                 static_cast<long long>(s.failed_attempts));
    if (s.submit_to_running >= 0) a.push_back(s.submit_to_running);
    if (s.kill_to_detected >= 0) b.push_back(s.kill_to_detected);
    if (s.kill_to_running >= 0) c.push_back(s.kill_to_running);
    if (s.kill_to_progress >= 0) d.push_back(s.kill_to_progress);
    if (s.steps_redone >= 0) e.push_back(static_cast<double>(s.steps_redone));
    if (s.failed_attempts >= 0) f.push_back(static_cast<double>(s.failed_attempts));
  }
  std::printf("worker: %s, topology %s, %d busy thread(s)\n",
              real ? ("tessera-worker builtin:" + setup.model).c_str() : "checkpointing script",
              setup.topology.c_str(), setup.load);
  std::printf("| measure (s) | n | p50 | max | target |\n| --- | --- | --- | --- | --- |\n");
  Row(real ? "planned -> all ranks running" : "submit -> all ranks running", a, 0.5);
  Row("node killed -> detected", b, real ? std::optional<double>(1.0) : std::nullopt);
  Row("node killed -> running again", c, 5.0);
  if (real) {
    Row("node killed -> progressing", d, 2.0);
    Row("steps redone (steps)", e, 0);
    Row("failed attempts", f, 0);
  }
  const size_t n = static_cast<size_t>(reps);
  return (a.size() == n && c.size() == n && (!real || d.size() == n)) ? 0 : 1;
}
