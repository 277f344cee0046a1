// load_bench: how many agents one tesserad serves. A real tesserad (the e2e
// harness, on loopback) and either
//   --mode sim:  N simulated agents, one thread each, that speak the agent
//                protocol as tessera-agent does (enrol with the join token,
//                then long-poll heartbeats at the controller's interval with
//                one emulated device each, reporting the workers they are
//                told to run as running), or
//   --mode real: N real `tessera-agent --no-benchmark` processes,
// plus API load (GET /api/v1/jobs?limit=5 in a loop) and a stream of
// one-device jobs. Prints, per N: health flaps (a node seen healthy and then
// not), the heartbeat round trip of beats that are answered at once (the
// controller's handling time plus the loopback), API GET p50/p99/max, and
// submit -> running p50/max.
//
//   build/bench/cluster/load_bench --mode sim --agents 100,200,500 --seconds 20
//   build/bench/cluster/load_bench --mode real --agents 20,40,60 --seconds 15
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
#include "tests/integration/harness.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using tessera::api::Json;
namespace api = tessera::api;
namespace testing = tessera::testing;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Samples {
  std::mutex mu;
  std::vector<double> ms;
  void Add(double v) {
    std::lock_guard lock(mu);
    ms.push_back(v);
  }
  // The q-quantile (0..1), or -1 without samples.
  double Quantile(double q) {
    std::lock_guard lock(mu);
    if (ms.empty()) return -1;
    std::vector<double> s = ms;
    std::sort(s.begin(), s.end());
    return s[std::min(s.size() - 1, static_cast<size_t>(q * static_cast<double>(s.size())))];
  }
  size_t size() {
    std::lock_guard lock(mu);
    return ms.size();
  }
};

std::string ReadLine(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return line;
}

// One simulated agent: the protocol loop of agent/agent.cc, with one
// emulated device and workers that "run" as soon as they are desired.
class SimAgent {
 public:
  SimAgent(std::string node, const testing::Cluster& cluster, std::string join_token,
           Samples* beat_ms, std::atomic<bool>* stop)
      : node_(std::move(node)),
        host_(cluster.controller_host()),
        port_(cluster.port()),
        join_token_(std::move(join_token)),
        beat_ms_(beat_ms),
        stop_(stop) {}

  void Run() {
    api::HttpClient client(host_, port_, 15s);
    client.SetBearerToken(join_token_);
    auto enrolled = client.Request("POST", "/api/v1/agent/enroll", Json{{"node", node_}}.dump());
    if (enrolled.ok() && enrolled->status == 201) {
      auto issued = api::IssuedNodeCredentialFromJson(Json::parse(enrolled->body));
      if (issued.ok()) client.SetBearerToken(issued->credential);
    }  // else: a controller without enrolment takes the join token itself
    api::HeartbeatRequest req;
    req.node = node_;
    req.address = "127.0.0.1";
    req.agent_started_ms = 1;
    req.cpu_cores = 2;
    api::Device d;
    d.node = node_;
    d.index = 0;
    d.name = "RTX4090 (emulated)";
    d.type = "cuda";
    d.memory_bytes = int64_t{24} << 30;
    d.measured_tflops = 0.4;
    d.mem_bandwidth_gbps = 1;
    d.emulated = true;
    req.devices.push_back(d);
    const api::Device device = d;
    int64_t wait_ms = 0;
    int64_t interval_ms = 1000;
    while (!stop_->load()) {
      req.wait_ms = wait_ms;
      const auto start = Clock::now();
      auto res = client.Request("POST", "/api/v1/agent/heartbeat", api::ToJson(req).dump());
      const auto took = Clock::now() - start;
      if (!res.ok() || res->status != 200) {
        ++failures;
        std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
        continue;
      }
      if (wait_ms == 0) beat_ms_->Add(Ms(took));
      auto answer = api::HeartbeatResponseFromJson(Json::parse(res->body));
      if (!answer.ok()) {
        ++failures;
        continue;
      }
      interval_ms = std::max<int64_t>(answer->heartbeat_interval_ms, 100);
      // As tessera-agent: device rows only while the controller lacks them.
      if (answer->accepts_unchanged_inventory && !answer->send_inventory) {
        req.inventory_unchanged = true;
        req.devices.clear();
      } else if (req.inventory_unchanged) {
        req.inventory_unchanged = false;
        req.devices = {device};
      }
      std::set<api::WorkerKey> desired, reported;
      for (const auto& l : answer->desired) desired.insert(l.key);
      for (const auto& w : req.workers) reported.insert(w.key);
      if (desired != reported) {
        // Start what is new, stop what is gone; report at once.
        req.workers.clear();
        for (const auto& k : desired) {
          api::WorkerStatus w;
          w.key = k;
          w.pid = 4242;
          w.state = api::WorkerState::kRunning;
          req.workers.push_back(w);
        }
        wait_ms = 0;
        continue;
      }
      const bool held = wait_ms > 0 && took >= std::chrono::milliseconds(wait_ms / 2);
      if (wait_ms > 0 && !held) {
        // Answered early without news: pace like the agent does.
        std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms) - took);
      } else if (wait_ms == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms) - took);
      }
      wait_ms = std::min<int64_t>(interval_ms, 3000);
    }
  }

  std::atomic<int> failures{0};

 private:
  std::string node_;
  std::string host_;
  uint16_t port_;
  std::string join_token_;
  Samples* beat_ms_;
  std::atomic<bool>* stop_;
};

struct Row {
  int agents = 0;
  int healthy = 0;
  int flaps = 0;
  double beat_p50 = -1, beat_p99 = -1;
  size_t beats = 0;
  double get_p50 = -1, get_p99 = -1, get_max = -1;
  size_t gets = 0;
  double run_p50 = -1, run_max = -1;
  int jobs = 0, jobs_running = 0;
  int failures = 0;
};

Row RunOne(const std::string& mode, int agents, int seconds) {
  Row row;
  row.agents = agents;
  testing::Cluster cluster("load-" + mode + "-" + std::to_string(agents), /*fast=*/false);
  cluster.StartController();
  {
    int status = 0;
    cluster.PostJson("/api/v1/entrypoints",
                     {{"name", "cmd:sleep"}, {"command", "/bin/sleep"}, {"description", "load"}},
                     &status);
  }
  std::atomic<bool> stop{false};
  Samples beat_ms;
  std::vector<std::unique_ptr<SimAgent>> sims;
  std::vector<std::thread> threads;
  const std::string join = ReadLine(cluster.dir() / "controller" / "join-token");
  for (int i = 0; i < agents; ++i) {
    const std::string node = "n" + std::to_string(i);
    if (mode == "real") {
      cluster.StartAgent(node,
                         "devices:\n  - {name: \"RTX4090 (emulated)\", memory: 24GiB, "
                         "relative_speed: 0.01, tflops: 0.4}\n",
                         {"--no-benchmark"});
    } else {
      sims.push_back(std::make_unique<SimAgent>(node, cluster, join, &beat_ms, &stop));
      threads.emplace_back([s = sims.back().get()] { s->Run(); });
    }
  }
  if (!testing::WaitFor([&] { return cluster.HealthyNodes() >= agents; }, 180s)) {
    std::fprintf(stderr, "only %d of %d nodes became healthy\n", cluster.HealthyNodes(), agents);
  }
  row.healthy = cluster.HealthyNodes();

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
  for (auto& t : threads) t.join();
  for (auto& s : sims) row.failures += s->failures.load();
  row.flaps = flaps.load();
  row.beats = beat_ms.size();
  row.beat_p50 = beat_ms.Quantile(0.5);
  row.beat_p99 = beat_ms.Quantile(0.99);
  row.gets = get_ms.size();
  row.get_p50 = get_ms.Quantile(0.5);
  row.get_p99 = get_ms.Quantile(0.99);
  row.get_max = get_ms.Quantile(1.0);
  row.run_p50 = run_ms.Quantile(0.5);
  row.run_max = run_ms.Quantile(1.0);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"load_bench: N agents (simulated or real) and API load against one tesserad"};
  std::string mode = "sim";
  std::string agents_list = "100,200,500";
  int seconds = 20;
  app.add_option("--mode", mode, "sim (protocol generator) or real (tessera-agent processes)")
      ->check(CLI::IsMember({"sim", "real"}));
  app.add_option("--agents", agents_list, "comma-separated agent counts");
  app.add_option("--seconds", seconds, "measured seconds per count");
  CLI11_PARSE(app, argc, argv);
  ::setenv("TESSERA_TEST_NO_NETNS", "1", 1);  // loopback: hundreds of nodes, one host

  std::vector<Row> rows;
  size_t pos = 0;
  while (pos < agents_list.size()) {
    size_t comma = agents_list.find(',', pos);
    if (comma == std::string::npos) comma = agents_list.size();
    const int n = std::stoi(agents_list.substr(pos, comma - pos));
    pos = comma + 1;
    std::fprintf(stderr, "[ load ] %s agents: %d, %d s\n", mode.c_str(), n, seconds);
    rows.push_back(RunOne(mode, n, seconds));
  }
  std::printf(
      "| mode | agents | healthy | flaps | beat rtt p50 / p99 ms (beats) | GET /jobs?limit=5 "
      "p50 / p99 / max ms (n) | submit->running p50 / max ms (jobs) | errors |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const Row& r : rows) {
    std::printf(
        "| %s | %d | %d | %d | %.2f / %.2f (%zu) | %.2f / %.2f / %.1f (%zu) | %.0f / %.0f (%d of "
        "%d) | %d |\n",
        mode.c_str(), r.agents, r.healthy, r.flaps, r.beat_p50, r.beat_p99, r.beats, r.get_p50,
        r.get_p99, r.get_max, r.gets, r.run_p50, r.run_max, r.jobs_running, r.jobs, r.failures);
  }
  return 0;
}
