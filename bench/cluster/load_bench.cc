// load_bench: how many agents one tesserad serves. A real tesserad (the e2e
// harness, on loopback) and either
//   --mode sim:  N simulated agents (bench/cluster/sim_agents.h), all driven
//                by --threads threads of one io_context, that speak the agent
//                protocol as tessera-agent does (enrol with the join token,
//                then long-poll heartbeats at the controller's interval with
//                one emulated device each, reporting the workers they are
//                told to run as running), or
//   --mode real: N real `tessera-agent --no-benchmark` processes,
// plus API load (GET /api/v1/jobs?limit=5 in a loop) and a stream of
// one-device jobs. Prints, per N: health flaps (a node seen healthy and then
// not), the heartbeat handling (sim mode, once every node is up: the round
// trip of beats answered at once, i.e. the reports of launched workers, and
// how late long polls are answered after their wait), API GET p50/p99/max,
// and submit -> running p50/max.
//
// --tls serves HTTPS (tesserad's "tls: on"; agents and clients verify with
// its CA). --pin puts tesserad on CPU 0 and this program (generator, API
// load) on CPU 1: a second configuration, not the default.
//
//   build/bench/cluster/load_bench --mode sim --agents 100,200,500,1000 --seconds 20
//   build/bench/cluster/load_bench --mode real --agents 20,40,60 --seconds 15
#include <sched.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/agent_protocol.h"
#include "api/http_client.h"
#include "api/node_identity.h"
#include "bench/cluster/latency.h"
#include "bench/cluster/sim_agents.h"
#include "tests/integration/harness.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using tessera::api::Json;
namespace api = tessera::api;
namespace harness = tessera::testing;
using tessera::bench::Ms;
using tessera::bench::Spread;
using tessera::bench::SpreadOf;

// Samples that threads add to.
struct Samples {
  std::mutex mu;
  std::vector<double> ms;
  void Add(double v) {
    std::lock_guard lock(mu);
    ms.push_back(v);
  }
  Spread Summary() {
    std::lock_guard lock(mu);
    return SpreadOf(ms);
  }
};

std::string ReadLine(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return line;
}

struct Row {
  int agents = 0;
  int healthy = 0;
  int flaps = 0;
  Spread beat_ms, late_ms, get_ms, run_ms;
  int jobs = 0, jobs_running = 0;
  int failures = 0;
};

struct Setup {
  std::string mode = "sim";
  int threads = 1;  // the simulated agents' threads
  bool tls = false;
  bool pin = false;
};

// Puts every thread of process `pid` on `cpu`.
void PinProcess(pid_t pid, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    const pid_t tid = std::stoi(task.path().filename().string());
    if (sched_setaffinity(tid, sizeof(set), &set) != 0) {
      std::fprintf(stderr, "cannot pin thread %d to CPU %d\n", tid, cpu);
    }
  }
}

Row RunOne(const Setup& setup, int agents, int seconds) {
  const std::string& mode = setup.mode;
  Row row;
  row.agents = agents;
  harness::Cluster cluster("load-" + mode + "-" + std::to_string(agents), /*fast=*/false);
  cluster.StartController(setup.tls ? "tls: on\n" : "");
  if (setup.pin) PinProcess(cluster.controller()->pid(), 0);
  {
    int status = 0;
    cluster.PostJson("/api/v1/entrypoints",
                     {{"name", "cmd:sleep"}, {"command", "/bin/sleep"}, {"description", "load"}},
                     &status);
  }
  std::atomic<bool> stop{false};
  const std::string join = ReadLine(cluster.dir() / "controller" / "join-token");
  std::unique_ptr<tessera::bench::SimAgents> sims;
  if (mode == "real") {
    for (int i = 0; i < agents; ++i) {
      cluster.StartAgent("n" + std::to_string(i),
                         "devices:\n  - {name: \"RTX4090 (emulated)\", memory: 24GiB, "
                         "relative_speed: 0.01, tflops: 0.4}\n",
                         {"--no-benchmark"});
    }
  } else {
    tessera::bench::SimAgentsOptions so;
    so.host = cluster.controller_host();
    so.port = cluster.port();
    so.ca_file = cluster.tls() ? cluster.ca_file().string() : "";
    so.join_token = join;
    so.agents = agents;
    so.threads = setup.threads;
    sims = std::make_unique<tessera::bench::SimAgents>(so);
    if (tessera::Status st = sims->Start(); !st.ok()) {
      std::fprintf(stderr, "simulated agents: %s\n", st.ToString().c_str());
      std::exit(1);
    }
  }
  if (!harness::WaitFor([&] { return cluster.HealthyNodes() >= agents; }, 180s)) {
    std::fprintf(stderr, "only %d of %d nodes became healthy\n", cluster.HealthyNodes(), agents);
  }
  row.healthy = cluster.HealthyNodes();
  // The measured window starts once every node is up: enrolment and the
  // agents' first beats are not the steady state.
  if (sims) sims->ClearSamples();

  // Health monitor: a node seen healthy that later is not is one flap.
  std::mutex flap_mu;
  std::map<std::string, std::string> last;
  std::atomic<int> flaps{0};
  std::thread monitor([&] {
    auto client = cluster.Client();
    while (!stop) {
      auto r = client->Request("GET", "/api/v1/nodes");
      if (r.ok() && r->status == 200) {
        for (const auto& n : Json::parse(r->body)["nodes"]) {
          std::string name = n["name"], health = n["health"];
          std::lock_guard lock(flap_mu);
          auto& prev = last[name];
          if (prev == "healthy" && health != "healthy") ++flaps;
          prev = health;
        }
      }
      std::this_thread::sleep_for(250ms);
    }
  });
  // API load: GET /api/v1/jobs?limit=5, one after the other.
  Samples get_ms;
  std::thread api_load([&] {
    auto client = cluster.Client();
    while (!stop) {
      const auto start = Clock::now();
      auto r = client->Request("GET", "/api/v1/jobs?limit=5");
      if (r.ok() && r->status == 200) get_ms.Add(Ms(Clock::now() - start));
      std::this_thread::sleep_for(20ms);
    }
  });
  // Jobs: one a second, each on one device; submit -> running.
  Samples run_ms;
  std::thread jobs([&] {
    auto client = cluster.Client();
    while (!stop) {
      Json spec = {{"name", "load"},
                   {"entrypoint", "cmd:sleep"},
                   {"global_batch", 1},
                   {"steps", 1},
                   {"min_devices", 1},
                   {"max_devices", 1},
                   {"args", Json::array({"600"})}};
      const auto start = Clock::now();
      auto r = client->Request("POST", "/api/v1/jobs", spec.dump());
      if (!r.ok() || r->status != 201) {
        std::fprintf(stderr, "submit failed: %s\n",
                     r.ok() ? r->body.c_str() : r.status().ToString().c_str());
        std::this_thread::sleep_for(1s);
        continue;
      }
      ++row.jobs;
      const int64_t id = Json::parse(r->body)["id"];
      std::string state;
      while (!stop) {
        auto g = client->Request("GET", "/api/v1/jobs/" + std::to_string(id));
        if (g.ok() && g->status == 200) {
          Json j = Json::parse(g->body);
          state = j["state"].get<std::string>() + " (" + j["reason"].get<std::string>() + ")";
        }
        if (state.starts_with("running")) {
          run_ms.Add(Ms(Clock::now() - start));
          ++row.jobs_running;
          break;
        }
        std::this_thread::sleep_for(10ms);
      }
      if (!state.starts_with("running"))
        std::fprintf(stderr, "job %lld: %s\n", (long long)id, state.c_str());
      std::this_thread::sleep_until(start + 1s);
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  stop = true;
  monitor.join();
  api_load.join();
  jobs.join();
  if (sims) {
    sims->Stop();
    row.failures = static_cast<int>(sims->failures());
    row.beat_ms = SpreadOf(sims->ImmediateBeatMs());
    row.late_ms = SpreadOf(sims->HeldBeatLateMs());
  }
  row.flaps = flaps.load();
  row.get_ms = get_ms.Summary();
  row.run_ms = run_ms.Summary();
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"load_bench: N agents (simulated or real) and API load against one tesserad"};
  Setup setup;
  std::string& mode = setup.mode;
  std::string agents_list = "100,200,500,1000";
  int seconds = 20;
  app.add_option("--mode", mode, "sim (protocol generator) or real (tessera-agent processes)")
      ->check(CLI::IsMember({"sim", "real"}));
  app.add_option("--agents", agents_list, "comma-separated agent counts");
  app.add_option("--seconds", seconds, "measured seconds per count");
  app.add_option("--threads", setup.threads, "threads driving the simulated agents")
      ->check(CLI::Range(1, 64));
  app.add_flag("--tls", setup.tls, "tesserad serves HTTPS (tls: on); everyone verifies its CA");
  app.add_flag("--pin", setup.pin, "tesserad on CPU 0, this program on CPU 1");
  CLI11_PARSE(app, argc, argv);
  ::setenv("TESSERA_TEST_NO_NETNS", "1", 1);  // loopback: hundreds of nodes, one host
  if (setup.pin) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(1, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
      std::fprintf(stderr, "--pin: cannot pin to CPU 1\n");
      return 1;
    }
  }

  std::vector<Row> rows;
  size_t pos = 0;
  while (pos < agents_list.size()) {
    size_t comma = agents_list.find(',', pos);
    if (comma == std::string::npos) comma = agents_list.size();
    const int n = std::stoi(agents_list.substr(pos, comma - pos));
    pos = comma + 1;
    std::fprintf(stderr, "[ load ] %s agents: %d, %d s%s%s\n", mode.c_str(), n, seconds,
                 setup.tls ? ", https" : "", setup.pin ? ", pinned" : "");
    rows.push_back(RunOne(setup, n, seconds));
  }
  std::printf(
      "| mode | agents | healthy | flaps | beat rtt p50 / p99 ms (beats) | long poll late p50 / "
      "p99 / max ms (polls) | GET /jobs?limit=5 p50 / p99 / max ms (n) | submit->running p50 / "
      "max ms (jobs) | errors |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const Row& r : rows) {
    // Real agents are not timed beat by beat.
    char beats[64] = "-", lates[80] = "-";
    if (r.beat_ms.count > 0) {
      std::snprintf(beats, sizeof(beats), "%.2f / %.2f (%zu)", r.beat_ms.p50, r.beat_ms.p99,
                    r.beat_ms.count);
    }
    if (r.late_ms.count > 0) {
      std::snprintf(lates, sizeof(lates), "%.2f / %.2f / %.1f (%zu)", r.late_ms.p50, r.late_ms.p99,
                    r.late_ms.max, r.late_ms.count);
    }
    std::printf(
        "| %s%s%s | %d | %d | %d | %s | %s | %.2f / %.2f / %.1f (%zu) | %.0f / %.0f (%d of %d) | "
        "%d |\n",
        mode.c_str(), setup.tls ? " https" : "", setup.pin ? " pinned" : "", r.agents, r.healthy,
        r.flaps, beats, lates, r.get_ms.p50, r.get_ms.p99, r.get_ms.max, r.get_ms.count,
        r.run_ms.p50, r.run_ms.max, r.jobs_running, r.jobs, r.failures);
  }
  return 0;
}
