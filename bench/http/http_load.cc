// http_load: a load generator for tesserad on loopback.
//
// Phase 1 (submit): N client threads POST job specs as fast as the server
// acknowledges them; every 201 means the job is durable (SQLite
// synchronous=FULL, group commit). Prints acknowledged submissions/s.
// Phase 2 (get): GET /api/v1/jobs/{id} at a fixed total rate (open loop,
// requests scheduled on a timetable so a slow answer does not hide latency)
// and prints p50/p99/max latency.
//
// Usage: http_load --port P --token T [--clients 32] [--seconds 5]
//                  [--get-rate 1000] [--get-seconds 5] [--pause-s 2]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "api/http_client.h"

using Clock = std::chrono::steady_clock;
using tessera::api::HttpClient;

namespace {

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5));
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"http_load: submissions/s and GET latency against tesserad"};
  int port = 0, clients = 32, get_rate = 1000;
  double seconds = 5, get_seconds = 5, pause_s = 2;
  std::string token, host = "127.0.0.1";
  app.add_option("--port", port)->required();
  app.add_option("--token", token)->required();
  app.add_option("--host", host);
  app.add_option("--clients", clients);
  app.add_option("--seconds", seconds);
  app.add_option("--get-rate", get_rate);
  app.add_option("--get-seconds", get_seconds);
  app.add_option("--pause-s", pause_s, "quiet time between the phases");
  CLI11_PARSE(app, argc, argv);

  // ---- phase 1: durable submissions ----
  std::atomic<int64_t> acked{0}, errors{0};
  std::mutex ids_mu;
  std::vector<int64_t> ids;
  auto start = Clock::now();
  auto deadline = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      HttpClient client(host, static_cast<uint16_t>(port));
      client.SetBearerToken(token);
      for (int i = 0; Clock::now() < deadline; ++i) {
        std::string body = R"({"name":"load-)" + std::to_string(c) + "-" + std::to_string(i) +
                           R"(","entrypoint":"builtin:colorize-unet","dataset":"/srv/x",)"
                           R"("global_batch":16,"steps":100})";
        auto r = client.Request("POST", "/api/v1/jobs", body);
        if (!r.ok() || r->status != 201) {
          ++errors;
          continue;
        }
        ++acked;
        if (i % 16 == 0) {
          auto pos = r->body.find("\"id\":");
          if (pos != std::string::npos) {
            std::lock_guard lock(ids_mu);
            ids.push_back(std::stoll(r->body.substr(pos + 5)));
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf(
      "| phase | clients | requests | errors | rate (/s) | p50 (ms) | p99 (ms) | max (ms) |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  std::printf("| durable submit | %d | %lld | %lld | %.0f | | | |\n", clients,
              static_cast<long long>(acked.load()), static_cast<long long>(errors.load()),
              acked.load() / elapsed);
  if (ids.empty()) return 1;

  // ---- phase 2: GET latency at a fixed rate ----
  std::this_thread::sleep_for(std::chrono::duration<double>(pause_s));
  const int get_threads = 8;
  std::vector<std::vector<double>> lat(get_threads);
  std::atomic<int64_t> get_errors{0};
  threads.clear();
  auto t0 = Clock::now() + std::chrono::milliseconds(50);
  const double interval_s = static_cast<double>(get_threads) / get_rate;
  const int64_t per_thread = static_cast<int64_t>(get_seconds * get_rate / get_threads);
  for (int t = 0; t < get_threads; ++t) {
    threads.emplace_back([&, t] {
      HttpClient client(host, static_cast<uint16_t>(port));
      client.SetBearerToken(token);
      for (int64_t i = 0; i < per_thread; ++i) {
        auto due = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                            (i + static_cast<double>(t) / get_threads) * interval_s));
        std::this_thread::sleep_until(due);
        int64_t id = ids[(i * get_threads + t) % ids.size()];
        auto r = client.Request("GET", "/api/v1/jobs/" + std::to_string(id));
        // Latency counts from the scheduled time (no coordinated omission).
        double ms = std::chrono::duration<double, std::milli>(Clock::now() - due).count();
        if (!r.ok() || r->status != 200) ++get_errors;
        lat[t].push_back(ms);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  std::printf("| GET job at %d/s | %d | %zu | %lld | %d | %.2f | %.2f | %.2f |\n", get_rate,
              get_threads, all.size(), static_cast<long long>(get_errors.load()), get_rate,
              Percentile(all, 0.5), Percentile(all, 0.99), Percentile(all, 1.0));
  return 0;
}
