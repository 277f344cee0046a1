// data_loader_bench: how fast a training rank's images become a batch
// (ImageFolderDataset::GetBatch: PNG decode, crop, the task's conversion, stack)
// with 1..N loader threads, the figure that bounds a GPU rank's samples/s when
// its step is faster than its loading.
//
// Usage: data_loader_bench [--dir D] [--images 256] [--size 256] [--batch 32]
//                          [--batches 8] [--threads 1,2,4,8] [--task colorize|denoise|gan]
//                          [--intra-op-threads 1]
// Without --dir, --images generated sample images of --size px are written to
// a temporary folder (removed afterwards). Prints one row per thread count:
// ms per batch (median of --batches after one warm-up), images/s and the
// speed-up over one thread; then the decode-only rate (ReadImage, one thread)
// for the share of decoding in one thread's time. --intra-op-threads: LibTorch's
// (1, as a training rank's default --threads; idle OpenMP threads spin).
#include <ATen/Parallel.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/lib/int_list.h"
#include "worker/data/image.h"
#include "worker/data/image_folder_dataset.h"
#include "worker/data/sample_images.h"

namespace {

using tessera::worker::DatasetOptions;
using tessera::worker::DataTask;
using tessera::worker::ImageFolderDataset;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

[[noreturn]] void Usage() {
  std::fprintf(stderr,
               "usage: data_loader_bench [--dir D] [--images N] [--size S] [--batch B] "
               "[--batches K] [--threads 1,2,4,8] [--task colorize|denoise|gan] "
               "[--intra-op-threads T]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, task_name = "colorize";
  int64_t images = 256, size = 256, batch = 32, batches = 8;
  std::vector<int> threads = {1, 2, 4, 8};
  int intra_op_threads = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) Usage();
    const std::string v = argv[++i];
    if (a == "--dir") {
      dir = v;
    } else if (a == "--images") {
      images = std::stoll(v);
    } else if (a == "--size") {
      size = std::stoll(v);
    } else if (a == "--batch") {
      batch = std::stoll(v);
    } else if (a == "--batches") {
      batches = std::stoll(v);
    } else if (a == "--threads") {
      threads = tessera::bench::ParseIntList(v);
    } else if (a == "--intra-op-threads") {
      intra_op_threads = std::stoi(v);
    } else if (a == "--task") {
      task_name = v;
    } else {
      Usage();
    }
  }
  if (images < 1 || size < 1 || batch < 1 || batches < 1 || threads.empty() ||
      intra_op_threads < 1) {
    Usage();
  }
  at::set_num_threads(intra_op_threads);
  DatasetOptions o;
  if (task_name == "colorize") {
    o.task = DataTask::kColorize;
  } else if (task_name == "denoise") {
    o.task = DataTask::kDenoise;
  } else if (task_name == "gan") {
    o.task = DataTask::kGan;
  } else {
    Usage();
  }
  o.image_size = size;

  std::string made;
  if (dir.empty()) {
    made = (std::filesystem::temp_directory_path() /
            ("tessera-data-loader-bench-" + std::to_string(::getpid())))
               .string();
    auto r = tessera::worker::GenerateSampleImages(made, images, size, 7);
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      return 1;
    }
    dir = made;
  }
  auto ds = ImageFolderDataset::Open(dir, o);
  if (!ds.ok()) {
    std::fprintf(stderr, "%s\n", ds.status().ToString().c_str());
    return 1;
  }
  const int64_t n = (*ds)->size();
  std::printf("%lld images in %s, %lld px crops, batch %lld, task %s, %u hardware threads\n\n",
              static_cast<long long>(n), dir.c_str(), static_cast<long long>(size),
              static_cast<long long>(batch), task_name.c_str(),
              std::thread::hardware_concurrency());
  std::printf(
      "| loader threads | ms per batch | images/s | vs 1 thread |\n| --- | --- | --- | --- |\n");
  double one = 0;
  int rc = 0;
  for (int t : threads) {
    std::vector<double> times;
    for (int64_t b = 0; b <= batches; ++b) {  // batch 0 warms up
      std::vector<int64_t> ids;
      for (int64_t i = 0; i < batch; ++i) ids.push_back((b * batch + i) % n);
      const auto start = Clock::now();
      auto got = (*ds)->GetBatch(ids, 0, t);
      const auto end = Clock::now();
      if (!got.ok()) {
        std::fprintf(stderr, "%s\n", got.status().ToString().c_str());
        rc = 1;
        break;
      }
      if (b > 0) times.push_back(Seconds(start, end));
    }
    if (times.empty()) break;
    const double s = Median(times);
    if (one == 0) one = s;
    std::printf("| %d | %.1f | %.0f | %.2fx |\n", t, s * 1e3, static_cast<double>(batch) / s,
                one / s);
  }
  // Decoding alone, one thread.
  const int64_t decodes = std::min<int64_t>(n, batch * batches);
  const auto start = Clock::now();
  for (int64_t i = 0; i < decodes; ++i) {
    auto img = tessera::worker::ReadImage((*ds)->path(i));
    if (!img.ok()) {
      std::fprintf(stderr, "%s\n", img.status().ToString().c_str());
      rc = 1;
      break;
    }
  }
  const double decode_s = Seconds(start, Clock::now()) / static_cast<double>(decodes);
  std::printf("\nReadImage alone, one thread: %.2f ms per image (%.0f images/s)\n", decode_s * 1e3,
              1.0 / decode_s);
  if (!made.empty()) std::filesystem::remove_all(made);
  return rc;
}
