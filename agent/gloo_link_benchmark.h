// Gloo link benchmark: what one hop of a collective costs between two ranks of
// this machine that talk Gloo over loopback, as the planner's ring model reads
// a link (scheduler/cost_model.h RingAllReduceSeconds: bandwidth in bytes/s and
// one-way latency in seconds).
//
// Purpose: ranks of emulated devices (and of CPU devices) exchange their
// collectives through c10d's Gloo backend on the host's loopback, and on a
// small machine each hop costs the thread wake-ups of both sides (a VM's 2
// cores: about 0.7 ms a hop), not the 10 us the planner assumes for a link it
// knows nothing of. A data-parallel job with synchronised batch norms
// all-reduces a few floats twice per batch norm, so that latency decides
// whether spreading the job over slow devices pays. The agent measures it at
// start and reports it; tesserad plans those nodes' links with it
// (daemon/controller/planning.h SnapshotOf).
//
// How: two ranks, this process and a peer process it starts (a job's ranks are
// processes, whose wake-ups cross address spaces), each
// with a ProcessGroupGloo over a TCP store on loopback and one intra-op thread,
// all-reduce a small and a large float32 tensor many times; with the means t_small and
// t_large of a two-rank ring, t = bytes / bandwidth + 2 x latency, so
// bandwidth = (large - small bytes) / (t_large - t_small) and
// latency = (t_small - small bytes / bandwidth) / 2 (FitTwoRankRing), and the
// CPU per hop is rank 0's process CPU time per small call over its 2 hops.
// A ring of more ranks than the host has cores waits longer per hop than two
// ranks do (agent/README.md has the figures); the planner's ring model scales
// the two-rank hop by the hop count only.
//
// This header is torch-free; gloo_link_benchmark.cc is in the benchmark library
// (tessera_agent_benchmark), linked only into tessera-device-bench.
// Thread safety: one benchmark at a time per process.
#ifndef TESSERA_AGENT_GLOO_LINK_BENCHMARK_H_
#define TESSERA_AGENT_GLOO_LINK_BENCHMARK_H_

#include <chrono>
#include <cstdint>
#include <functional>

#include "api/types.h"
#include "common/status.h"

namespace tessera::agent {

// What it measures: bandwidth (> 0 when measured), one hop's latency, and
// the CPU seconds a rank's process spends on one hop of a small collective
// (its threads' wake-ups and the kernel's socket work: ranks sharing a
// machine with fewer cores than ranks wait for each other's,
// scheduler/cost_model.h); the heartbeat carries it as it is.
using LinkFigures = api::NodeLink;

struct GlooLinkOptions {
  int64_t small_bytes = 256;      // a batch norm's statistics
  int64_t large_bytes = 4 << 20;  // a gradient bucket
  int small_calls = 200;          // timed calls of each size (after a warm-up)
  int large_calls = 20;
  std::chrono::seconds timeout{30};  // of each collective
};

// Two-rank ring fit of two timings (seconds per all-reduce of each size).
// kInvalidArgument unless 0 < small_bytes < large_bytes and 0 < t_small < t_large.
Result<LinkFigures> FitTwoRankRing(int64_t small_bytes, double t_small, int64_t large_bytes,
                                   double t_large);

// Rank 0: serves the store on a free loopback port, calls `start_peer(port)`
// (which starts a process that calls RunGlooLinkPeer(port, ...)), measures
// with it and returns the fit. LibTorch and Gloo exceptions, a peer that does
// not join within the timeout and start_peer's error become kUnavailable with
// the reason. Defined in tessera_agent_benchmark, as is the peer.
Result<LinkFigures> RunGlooLinkBenchmark(const std::function<Status(int port)>& start_peer,
                                         const GlooLinkOptions& options = {});
// Rank 1: joins rank 0's store at 127.0.0.1:port and runs the same calls.
Status RunGlooLinkPeer(int port, const GlooLinkOptions& options = {});

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_GLOO_LINK_BENCHMARK_H_
