// store_bench: durable write throughput of SqliteStore (WAL,
// synchronous=FULL, group commit) with N concurrent writer threads.
//
// Usage: store_bench [--threads 1,4,16,64] [--seconds 3] [--dir /tmp] [--op insert|progress|beat]
//   insert    InsertJob (default)
//   progress  what a heartbeat wrote before the metrics history: SetJobProgress
//   beat      what a heartbeat writes now: RecordProgress of the latest progress
//             and one history point for each of 8 ranks, a new step every call
//             (each thread is one agent with its own job; after 1000 steps the
//             history thins, so the steady state is measured)
// Prints one table row per thread count: writes/s, commits, writes per
// commit and mean commit time. Each row uses a fresh database file.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/lib/int_list.h"
#include "daemon/store/sqlite_store.h"

namespace {

using tessera::daemon::JobMetricPoint;
using tessera::daemon::NewJob;
using tessera::daemon::ProgressReport;
using tessera::daemon::SqliteStore;

constexpr int kRanksPerBeat = 8;

int Run(int threads, double seconds, const std::filesystem::path& dir, const std::string& op) {
  const std::filesystem::path path = dir / ("tessera-store-bench-" + std::to_string(::getpid()) +
                                            "-" + std::to_string(threads) + ".db");
  auto opened = SqliteStore::Open(path.string());
  if (!opened.ok()) {
    std::fprintf(stderr, "open %s: %s\n", path.c_str(), opened.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<SqliteStore> store = std::move(opened).value();
  tessera::api::JobSpec spec;
  spec.name = "bench";
  spec.entrypoint = "builtin:colorize-unet";
  spec.global_batch = 64;
  spec.steps = 1000;

  std::atomic<bool> stop{false};
  std::atomic<int64_t> done{0}, failed{0};
  std::vector<std::thread> workers;
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const std::string owner = "user" + std::to_string(t);
      tessera::api::JobId job = 0;
      if (op != "insert") {
        auto inserted = store->InsertJob(NewJob{owner, spec, 1, "submitted"});
        if (!inserted.ok()) {
          failed.fetch_add(1);
          return;
        }
        job = inserted->id;
      }
      int64_t step = 0;
      auto write = [&]() -> bool {
        if (op == "insert") return store->InsertJob(NewJob{owner, spec, 1, "submitted"}).ok();
        ++step;
        tessera::api::Json line = {{"step", step},     {"loss", 1.0 / static_cast<double>(step)},
                                   {"compute_s", 0.3}, {"comm_s", 0.1},
                                   {"bubble_s", 0.01}, {"samples_per_s", 512.0}};
        if (op == "progress") return store->SetJobProgress(job, line).ok();
        ProgressReport beat;
        beat.latest[job] = line;
        for (int64_t rank = 0; rank < kRanksPerBeat; ++rank) {
          auto point = tessera::api::MetricPointFromProgressLine(line, 1, rank, 1);
          beat.points.push_back(JobMetricPoint{job, *point});
        }
        return store->RecordProgress(beat).ok();
      };
      while (!stop.load(std::memory_order_relaxed)) {
        if (write()) {
          done.fetch_add(1, std::memory_order_relaxed);
        } else {
          failed.fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (std::thread& w : workers) w.join();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto stats = store->Stats();
  store.reset();
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::filesystem::remove(path.string() + suffix, ec);
  }
  const double per_commit =
      stats.commits ? static_cast<double>(stats.writes) / static_cast<double>(stats.commits) : 0;
  const double mean_ms =
      stats.commit_seconds.count
          ? 1000.0 * stats.commit_seconds.sum / static_cast<double>(stats.commit_seconds.count)
          : 0;
  std::printf("%8d %12lld %10.2f %12.0f %10llu %14.1f %16.2f %8lld\n", threads,
              static_cast<long long>(done.load()), elapsed,
              static_cast<double>(done.load()) / elapsed,
              static_cast<unsigned long long>(stats.commits), per_commit, mean_ms,
              static_cast<long long>(failed.load()));
  std::fflush(stdout);
  return failed.load() == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads = {1, 4, 16, 64};
  double seconds = 3.0;
  std::filesystem::path dir = std::filesystem::temp_directory_path();
  std::string op = "insert";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--threads") {
      threads = tessera::bench::ParseIntList(argv[i + 1]);
    } else if (flag == "--seconds") {
      seconds = std::atof(argv[i + 1]);
    } else if (flag == "--dir") {
      dir = argv[i + 1];
    } else if (flag == "--op") {
      op = argv[i + 1];
    } else {
      op = "";
      break;
    }
  }
  if (op != "insert" && op != "progress" && op != "beat") {
    std::fprintf(stderr,
                 "usage: %s [--threads 1,4,16,64] [--seconds 3] [--dir /tmp] "
                 "[--op insert|progress|beat]\n",
                 argv[0]);
    return 2;
  }
  std::printf("SqliteStore durable %s (WAL, synchronous=FULL, group commit), dir %s\n",
              op == "insert"     ? "InsertJob"
              : op == "progress" ? "SetJobProgress"
                                 : "RecordProgress (8 ranks a beat)",
              dir.c_str());
  std::printf("%8s %12s %10s %12s %10s %14s %16s %8s\n", "threads", "writes", "seconds", "writes/s",
              "commits", "writes/commit", "mean commit ms", "failed");
  int rc = 0;
  for (int t : threads) rc |= Run(t, seconds, dir, op);
  return rc;
}
