// listing_bench: listing a large infer input, as a user meets it. A real
// tesserad (the e2e harness, on loopback) with a real SQLite file and data
// roots; an infer job submitted over HTTP names either
//   list:    a list file of N lines "shard-0042/img-0001234.png" (relative
//            to the list file's folder), or
//   folder:  the folder itself (N images in shards of --shard files; more
//            than the lister's sort limit, so written in walk order).
// Every item must be an existing regular file under a data root
// (daemon/controller/infer_input.h), so the generator makes them real: one small PNG per
// shard and hard links to it for the rest (N directory entries, one inode per
// shard; no image is ever read).
//
// Measured, per input: the submit call (admission checks a list file's
// items), the listing (submit until the job reads all N items and no longer
// says "listing input"), items/s, tesserad's RSS before the submit and its
// peak during submit + listing (VmHWM from /proc/<pid>/status, reset before
// each input through clear_refs, plus VmRSS sampled every 20 ms), chunks,
// the SQLite file's growth (+ WAL), the pending reasons seen while listing, then
// GET /api/v1/jobs/{id} latency and, once an agent runs the job (a sleeping
// command), the latency of lease calls (POST /api/v1/jobs/{id}/leases, one
// chunk each, completing the previous one) with 10M items in the store.
//
//   build/bench/cluster/listing_bench --items 10000000 --input list,folder
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/http_client.h"
#include "api/lease_protocol.h"
#include "bench/cluster/latency.h"
#include "daemon/auth/lease_tokens.h"
#include "tests/integration/harness.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using tessera::api::Json;
namespace api = tessera::api;
namespace harness = tessera::testing;
namespace fs = std::filesystem;
using tessera::bench::Ms;
using tessera::bench::Seconds;
using tessera::bench::Spread;
using tessera::bench::SpreadOf;

struct Mem {
  int64_t rss_kb = -1;
  int64_t hwm_kb = -1;
};

Mem ReadMem(pid_t pid) {
  Mem m;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("VmRSS:")) m.rss_kb = std::stoll(line.substr(6));
    if (line.starts_with("VmHWM:")) m.hwm_kb = std::stoll(line.substr(6));
  }
  return m;
}

// Resets VmHWM to the current RSS (Linux >= 4.0); false when not allowed.
bool ResetPeak(pid_t pid) {
  std::ofstream out("/proc/" + std::to_string(pid) + "/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

double MiB(int64_t kb) { return static_cast<double>(kb) / 1024.0; }

std::string ReadLine(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return line;
}

// A 1x1 grey PNG.
constexpr unsigned char kPng[] = {
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48,
    0x44, 0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x00, 0x00,
    0x00, 0x3a, 0x7e, 0x9b, 0x55, 0x00, 0x00, 0x00, 0x0a, 0x49, 0x44, 0x41, 0x54, 0x78,
    0x9c, 0x63, 0x68, 0x00, 0x00, 0x00, 0x82, 0x00, 0x81, 0x4c, 0x17, 0xd7, 0xdf, 0x00,
    0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82};

std::string ItemName(int64_t i, int64_t per_shard) {
  char name[64];
  std::snprintf(name, sizeof(name), "shard-%04lld/img-%07lld.png",
                static_cast<long long>(i / per_shard), static_cast<long long>(i));
  return name;
}

// N images below `data` (hard links, one real PNG per shard) and
// data/list.txt naming them. False (with a message) on an error.
bool MakeInput(const fs::path& data, int64_t items, int64_t per_shard) {
  fs::create_directories(data);
  std::ofstream list(data / "list.txt");
  std::string first;
  for (int64_t i = 0; i < items; ++i) {
    const std::string name = ItemName(i, per_shard);
    const fs::path path = data / name;
    if (i % per_shard == 0) {
      fs::create_directories(path.parent_path());
      std::ofstream(path, std::ios::binary)
          .write(reinterpret_cast<const char*>(kPng), sizeof(kPng));
      first = path.string();
    } else if (::link(first.c_str(), path.c_str()) != 0) {
      std::perror(("link " + path.string()).c_str());
      return false;
    }
    list << name << '\n';
  }
  list.flush();
  return static_cast<bool>(list);
}

struct Row {
  std::string input;
  bool ok = false;
  std::string failure;
  double submit_s = -1, listing_s = -1;
  int64_t items = 0, chunks = 0;
  Mem before, peak, after;
  int64_t sampled_peak_kb = -1;
  int64_t db_bytes = 0;
  std::string first_reason, last_reason;
  int listing_polls = 0;
  Spread get_ms, lease_ms;
  std::string first_item;
};

class Bench {
 public:
  Bench(harness::Cluster& cluster, int64_t items, int lease_calls)
      : cluster_(cluster), items_(items), lease_calls_(lease_calls) {}

  Row Run(const std::string& input, const fs::path& dataset) {
    Row row;
    row.input = input;
    const pid_t pid = cluster_.controller()->pid();
    auto client = Client(1h);
    if (!ResetPeak(pid)) std::fprintf(stderr, "cannot reset VmHWM: the peak is the process's\n");
    row.before = ReadMem(pid);
    const int64_t db_before = DbBytes();

    std::atomic<bool> stop{false};
    std::atomic<int64_t> sampled{0};
    std::thread sampler([&] {
      while (!stop) {
        sampled = std::max<int64_t>(sampled, ReadMem(pid).rss_kb);
        std::this_thread::sleep_for(20ms);
      }
    });

    const Json spec = {{"name", "listing-" + input},
                       {"kind", "infer"},
                       {"entrypoint", "cmd:sleep"},
                       {"dataset", dataset.string()},
                       {"output", (cluster_.dir() / "out" / input).string()},
                       {"args", Json::array({"3600"})},
                       {"global_batch", 1},
                       {"min_devices", 1},
                       {"max_devices", 1}};
    const auto start = Clock::now();
    auto r = client->Request("POST", "/api/v1/jobs", spec.dump());
    row.submit_s = Seconds(Clock::now() - start);
    if (!r.ok() || r->status != 201) {
      row.failure = "submit: " + (r.ok() ? r->body : r.status().ToString());
      stop = true;
      sampler.join();
      return row;
    }
    const int64_t id = Json::parse(r->body)["id"];
    const std::string target = "/api/v1/jobs/" + std::to_string(id);
    auto poller = Client(60s);
    for (auto deadline = Clock::now() + 2h; Clock::now() < deadline;
         std::this_thread::sleep_for(100ms)) {
      auto got = poller->Request("GET", target);
      if (!got.ok() || got->status != 200) continue;
      const Json job = Json::parse(got->body);
      const std::string state = job.value("state", "");
      const std::string reason = job.value("reason", "");
      if (reason.starts_with("listing input")) {
        if (row.first_reason.empty()) row.first_reason = reason;
        row.last_reason = reason;
        ++row.listing_polls;
        continue;
      }
      if (state == "failed") {
        row.failure = "job failed: " + reason;
        break;
      }
      const Json& inf = job["inference"];
      if (inf.is_object() && inf.value("images_total", int64_t{0}) == items_) {
        row.listing_s = Seconds(Clock::now() - start);
        row.items = inf.value("images_total", int64_t{0});
        row.chunks = inf.value("chunks_total", int64_t{0});
        row.ok = true;
        break;
      }
    }
    stop = true;
    sampler.join();
    row.peak = ReadMem(pid);
    row.sampled_peak_kb = sampled;
    if (!row.ok) {
      if (row.failure.empty()) row.failure = "listing did not finish";
      return row;
    }
    row.db_bytes = DbBytes() - db_before;

    // The job read path with the whole input in the store.
    std::vector<double> get_ms;
    for (int i = 0; i < 200; ++i) {
      const auto t = Clock::now();
      auto got = poller->Request("GET", target);
      if (got.ok() && got->status == 200) get_ms.push_back(Ms(Clock::now() - t));
    }
    row.get_ms = SpreadOf(get_ms);

    Lease(id, row);
    (void)poller->Request("POST", target + "/cancel");
    harness::WaitFor(
        [&] {
          const std::string s = cluster_.JobState(id);
          return s == "cancelled" || s == "failed" || s == "succeeded";
        },
        120s);
    row.after = ReadMem(pid);
    return row;
  }

 private:
  std::unique_ptr<api::HttpClient> Client(std::chrono::milliseconds timeout) {
    auto c = std::make_unique<api::HttpClient>(
        api::ServerUrl{false, cluster_.controller_host(), cluster_.port(), ""}, timeout);
    c->SetBearerToken(cluster_.admin_token());
    return c;
  }

  // tessera.db and its WAL.
  int64_t DbBytes() const {
    const fs::path db = cluster_.dir() / "controller" / "tessera.db";
    int64_t bytes = 0;
    for (const char* suffix : {"", "-wal"}) {
      std::error_code ec;
      const auto size = fs::file_size(db.string() + suffix, ec);
      if (!ec) bytes += static_cast<int64_t>(size);
    }
    return bytes;
  }

  // Once the job's attempt runs on the agent, lease calls as its rank 0.
  void Lease(int64_t id, Row& row) {
    const std::string target = "/api/v1/jobs/" + std::to_string(id);
    int64_t attempt = 0;
    std::string state, reason;
    if (!harness::WaitFor(
            [&] {
              const Json job = cluster_.GetJson(target);
              if (!job.is_object()) return false;
              state = job.value("state", "");
              reason = job.value("reason", "");
              attempt = job.value("attempt", int64_t{0});
              return state == "starting" || state == "running";
            },
            180s)) {
      std::fprintf(stderr, "job %lld did not start (%s: %s): no lease measured\n",
                   static_cast<long long>(id), state.c_str(), reason.c_str());
      return;
    }
    const tessera::daemon::LeaseTokens tokens(
        ReadLine(cluster_.dir() / "controller" / "lease-key"));
    auto client = Client(60s);
    client->SetBearerToken(tokens.For(id, attempt, 0));
    std::vector<double> ms;
    std::optional<api::LeasedChunk> held;
    for (int i = 0; i < lease_calls_; ++i) {
      api::LeaseRequest req;
      req.attempt = attempt;
      req.rank = 0;
      req.max_chunks = 1;
      if (held) {
        req.completed.push_back({held->chunk, static_cast<int64_t>(held->items.size()), 0.001});
      }
      const auto t = Clock::now();
      auto r = client->Request("POST", target + "/leases", api::ToJson(req).dump());
      const double took = Ms(Clock::now() - t);
      if (!r.ok() || r->status != 200) {
        std::fprintf(stderr, "lease: %s\n",
                     r.ok() ? r->body.c_str() : r.status().ToString().c_str());
        break;
      }
      auto resp = api::LeaseResponseFromJson(Json::parse(r->body));
      if (!resp.ok() || resp->chunks.empty()) break;
      ms.push_back(took);
      held = resp->chunks.front();
      if (row.first_item.empty() && !held->items.empty()) row.first_item = held->items.front();
    }
    row.lease_ms = SpreadOf(ms);
  }

  harness::Cluster& cluster_;
  const int64_t items_;
  const int lease_calls_;
};

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"listing_bench: a large infer input listed by a real tesserad"};
  int64_t items = 10'000'000, per_shard = 10'000;
  int lease_calls = 200;
  std::string inputs = "list,folder";
  bool no_roots = false;
  app.add_option("--items", items, "images in the input")->check(CLI::PositiveNumber);
  app.add_option("--shard", per_shard, "images per shard folder (hard links per inode)")
      ->check(CLI::Range(1, 60'000));
  app.add_option("--input", inputs, "list, folder or both (comma-separated)");
  app.add_option("--leases", lease_calls, "lease calls timed per input")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--no-roots", no_roots, "configure no data roots (admission checks no items)");
  CLI11_PARSE(app, argc, argv);

  // Loopback: the listing is the subject, not the network.
  ::setenv("TESSERA_TEST_NO_NETNS", "1", 1);
  harness::Cluster cluster("listing-bench", /*fast=*/false);
  const fs::path data = cluster.dir() / "data", out = cluster.dir() / "out";
  fs::create_directories(out);
  auto t = Clock::now();
  if (!MakeInput(data, items, per_shard)) return 1;
  std::fprintf(stderr, "made %lld images and a list file in %.1f s under %s\n",
               static_cast<long long>(items), Seconds(Clock::now() - t), data.c_str());

  std::string config;
  if (!no_roots) {
    config = "data_roots:\n  - {path: " + data.string() +
             ", access: read}\n  - {path: " + out.string() + ", access: write}\n";
  }
  cluster.StartController(config);
  {
    int status = 0;
    cluster.PostJson("/api/v1/entrypoints",
                     {{"name", "cmd:sleep"}, {"command", "/bin/sleep"}, {"description", "bench"}},
                     &status);
    if (status / 100 != 2) {
      std::fprintf(stderr, "cannot register cmd:sleep (HTTP %d)\n", status);
      return 1;
    }
  }
  // One node with one device, there before the jobs: the controller lists
  // the queue's inputs only while a device is free.
  cluster.StartAgent(
      "box",
      "devices:\n  - {name: \"T4 (emulated)\", memory: 16GiB, relative_speed: 1.0, tflops: 8}\n",
      {"--no-benchmark"});
  if (!harness::WaitFor([&] { return cluster.HealthyNodes() == 1; }, 120s)) {
    std::fprintf(stderr, "the agent did not become healthy\n");
    return 1;
  }
  Bench bench(cluster, items, lease_calls);
  std::vector<Row> rows;
  for (const std::string& input : Split(inputs)) {
    if (input != "list" && input != "folder") {
      std::fprintf(stderr, "unknown input %s\n", input.c_str());
      return 1;
    }
    rows.push_back(bench.Run(input, input == "list" ? data / "list.txt" : data));
    const Row& r = rows.back();
    std::fprintf(stderr, "%s: %s\n", input.c_str(), r.ok ? "listed" : r.failure.c_str());
  }

  std::printf("%lld images in shards of %lld, data roots %s, %u CPU cores\n",
              static_cast<long long>(items), static_cast<long long>(per_shard),
              no_roots ? "off" : "on", std::thread::hardware_concurrency());
  std::printf(
      "| input | items | chunks | submit s | listing s | items/s | RSS before MiB | peak RSS MiB "
      "(VmHWM / sampled) | RSS after MiB | SQLite growth MiB | GET job p50/p99 ms | lease "
      "p50/p99/max "
      "ms (n) |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  int failed = 0;
  for (const Row& r : rows) {
    if (!r.ok) {
      std::printf("| %s | failed: %s |\n", r.input.c_str(), r.failure.c_str());
      ++failed;
      continue;
    }
    std::printf(
        "| %s | %lld | %lld | %.2f | %.1f | %.0f | %.1f | %.1f / %.1f | %.1f | %.1f | %.2f / %.2f "
        "| %.2f / %.2f / %.2f (%zu) |\n",
        r.input.c_str(), static_cast<long long>(r.items), static_cast<long long>(r.chunks),
        r.submit_s, r.listing_s, static_cast<double>(r.items) / r.listing_s, MiB(r.before.rss_kb),
        MiB(r.peak.hwm_kb), MiB(r.sampled_peak_kb), MiB(r.after.rss_kb),
        static_cast<double>(r.db_bytes) / (1024.0 * 1024.0), r.get_ms.p50, r.get_ms.p99,
        r.lease_ms.p50, r.lease_ms.p99, r.lease_ms.max, r.lease_ms.count);
  }
  for (const Row& r : rows) {
    if (!r.ok) continue;
    std::printf(
        "%s: %d polls said \"listing input\": first \"%s\", last \"%s\"; first leased item %s\n",
        r.input.c_str(), r.listing_polls, r.first_reason.c_str(), r.last_reason.c_str(),
        r.first_item.c_str());
  }
  std::fflush(stdout);
  return failed == 0 ? 0 : 1;
}
