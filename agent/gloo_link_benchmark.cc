#include "agent/gloo_link_benchmark.h"

#include <time.h>
#include <torch/torch.h>

#include <algorithm>
#include <exception>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

namespace tessera::agent {
namespace {

// The mean, not the median: a step pays its collectives one after another, so
// their slow tail (a rank waiting for a core) is part of what it pays.
double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

double ProcessCpuSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// One rank: joins the group, all-reduces each size `calls` times after a
// warm-up, and keeps its seconds per call of each size; *small_cpu: the
// process's CPU seconds per small call (every thread of it: Gloo's too).
void RunRank(int rank, const c10::intrusive_ptr<c10d::Store>& store, const GlooLinkOptions& o,
             std::vector<double>* small, std::vector<double>* large, double* small_cpu) {
  auto opts = c10d::ProcessGroupGloo::Options::create(
      std::chrono::duration_cast<std::chrono::milliseconds>(o.timeout));
  opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, 2, opts);
  auto time_calls = [&](int64_t bytes, int calls, std::vector<double>* out) {
    std::vector<torch::Tensor> t = {torch::ones({std::max<int64_t>(1, bytes / 4)})};
    for (int i = 0; i < 5; ++i) pg->allreduce(t)->wait();
    pg->barrier()->wait();  // both ranks start the timed calls together
    const double cpu0 = ProcessCpuSeconds();
    for (int i = 0; i < calls; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      pg->allreduce(t)->wait();
      out->push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return (ProcessCpuSeconds() - cpu0) / calls;
  };
  *small_cpu = time_calls(o.small_bytes, o.small_calls, small);
  time_calls(o.large_bytes, o.large_calls, large);
}

c10::intrusive_ptr<c10d::Store> Store(int rank, int port, const GlooLinkOptions& o) {
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(port);
  so.isServer = rank == 0;
  so.numWorkers = 2;
  so.waitWorkers = false;
  so.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(o.timeout);
  return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
}

// The first line of a c10 message (its backtrace follows).
std::string FirstLine(const std::exception& e) {
  const std::string what = e.what();
  return what.substr(0, what.find('\n'));
}

}  // namespace

Result<LinkFigures> FitTwoRankRing(int64_t small_bytes, double t_small, int64_t large_bytes,
                                   double t_large) {
  if (!(small_bytes > 0 && small_bytes < large_bytes)) {
    return InvalidArgument("the small size must be above 0 and below the large one");
  }
  if (!(t_small > 0 && t_small < t_large)) {
    return InvalidArgument("the small all-reduce must take less time than the large one (" +
                           std::to_string(t_small) + " s against " + std::to_string(t_large) +
                           " s)");
  }
  LinkFigures f;
  f.bandwidth_bytes_per_s = static_cast<double>(large_bytes - small_bytes) / (t_large - t_small);
  f.latency_s =
      std::max(0.0, (t_small - static_cast<double>(small_bytes) / f.bandwidth_bytes_per_s) / 2);
  return f;
}

Result<LinkFigures> RunGlooLinkBenchmark(const std::function<Status(int port)>& start_peer,
                                         const GlooLinkOptions& options) {
  if (options.small_calls < 1 || options.large_calls < 1) {
    return InvalidArgument("each size needs at least one timed call");
  }
  at::set_num_threads(1);
  std::vector<double> small, large;
  double small_cpu = 0;
  try {
    auto store = Store(0, 0, options);
    const int port = static_cast<c10d::TCPStore&>(*store).getPort();
    if (Status started = start_peer(port); !started.ok()) {
      return Unavailable("Gloo link benchmark: the peer did not start: " + started.message());
    }
    RunRank(0, store, options, &small, &large, &small_cpu);
  } catch (const std::exception& e) {
    return Unavailable("Gloo link benchmark failed: " + FirstLine(e));
  }
  // Rank 0's timings: both ranks leave each call together, give or take a hop.
  TESSERA_ASSIGN_OR_RETURN(LinkFigures f, FitTwoRankRing(options.small_bytes, Mean(small),
                                                         options.large_bytes, Mean(large)));
  f.cpu_per_hop_s = small_cpu / 2;  // a two-rank ring: 2 hops a call
  return f;
}

Status RunGlooLinkPeer(int port, const GlooLinkOptions& options) {
  at::set_num_threads(1);
  std::vector<double> small, large;
  double small_cpu = 0;
  try {
    RunRank(1, Store(1, port, options), options, &small, &large, &small_cpu);
  } catch (const std::exception& e) {
    return Unavailable("Gloo link benchmark peer failed: " + FirstLine(e));
  }
  return Status::Ok();
}

}  // namespace tessera::agent
