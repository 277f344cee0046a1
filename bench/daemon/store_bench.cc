// store_bench: durable InsertJob throughput of SqliteStore (WAL,
// synchronous=FULL, group commit) with N concurrent writer threads.
//
// Usage: store_bench [--threads 1,4,16,64] [--seconds 3] [--dir /tmp]
// Prints one table row per thread count: inserts/s, commits, writes per
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

#include "daemon/sqlite_store.h"

namespace {

using tessera::daemon::NewJob;
using tessera::daemon::SqliteStore;

std::vector<int> ParseList(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoi(item));
  return out;
}

int Run(int threads, double seconds, const std::filesystem::path& dir) {
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
      while (!stop.load(std::memory_order_relaxed)) {
        if (store->InsertJob(NewJob{owner, spec, 1, "submitted"}).ok()) {
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
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--threads") {
      threads = ParseList(argv[i + 1]);
    } else if (flag == "--seconds") {
      seconds = std::atof(argv[i + 1]);
    } else if (flag == "--dir") {
      dir = argv[i + 1];
    } else {
      std::fprintf(stderr, "usage: %s [--threads 1,4,16,64] [--seconds 3] [--dir /tmp]\n", argv[0]);
      return 2;
    }
  }
  std::printf("SqliteStore durable InsertJob (WAL, synchronous=FULL, group commit), dir %s\n",
              dir.c_str());
  std::printf("%8s %12s %10s %12s %10s %14s %16s %8s\n", "threads", "inserts", "seconds",
              "inserts/s", "commits", "writes/commit", "mean commit ms", "failed");
  int rc = 0;
  for (int t : threads) rc |= Run(t, seconds, dir);
  return rc;
}
