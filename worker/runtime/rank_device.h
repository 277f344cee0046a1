// RankDevice: which device a worker rank computes on, and making it the
// process's current device before anything touches CUDA.
//
// The agent starts each rank with TESSERA_DEVICE ("cpu" or "cuda:<k>", k an
// index into the rank's CUDA_VISIBLE_DEVICES, launch/worker_env.h) and the
// torchrun variables. A rank started by hand or by another launcher may say just
// "cuda"; it then takes cuda:LOCAL_RANK, as torchrun scripts do. Every rank that
// computes on a GPU calls SelectRankDevice first thing: without it each rank
// opens a context on GPU 0 and NCCL guesses the device of its barrier.
//
// Thread safety: ResolveRankDevice is pure; SelectRankDevice sets the calling
// process's current CUDA device (call it once, from the main thread, before
// any other thread uses CUDA).
#ifndef TESSERA_WORKER_RUNTIME_RANK_DEVICE_H_
#define TESSERA_WORKER_RUNTIME_RANK_DEVICE_H_

#include <torch/torch.h>

#include <string>

#include "common/status.h"
#include "worker/runtime/emulated_device.h"

namespace tessera::worker {

struct ResolvedDevice {
  bool cuda = false;
  int index = -1;  // CUDA device index (within CUDA_VISIBLE_DEVICES); -1 on the CPU
  std::string name() const { return cuda ? "cuda:" + std::to_string(index) : "cpu"; }
};

// Pure. `device`: "cpu", "cpu:<n>", "cuda" or "cuda:<k>"; `local_rank`: LOCAL_RANK;
// `visible_gpus`: how many GPUs CUDA sees in this process. Errors (field
// TESSERA_DEVICE): an unknown device text; a CUDA device when no GPU is visible
// (the message names CUDA_VISIBLE_DEVICES as `visible_devices_env` gives it); an
// index (explicit, or LOCAL_RANK for "cuda") at or past `visible_gpus`.
Result<ResolvedDevice> ResolveRankDevice(const std::string& device, int local_rank,
                                         int visible_gpus,
                                         const std::string& visible_devices_env = "");

// Resolves `device` against this process's CUDA (device count and
// CUDA_VISIBLE_DEVICES) and, for a GPU, makes it the current CUDA device.
// REQUIRES: called before this process creates CUDA tensors or NCCL groups.
Result<torch::Device> SelectRankDevice(const std::string& device, int local_rank);

// The clock of the rank's compute segments: on the CPU an EmulatedDevice of the
// declared speed (TESSERA_DEVICE_SPEED; 1 is a plain CPU); on a GPU never an
// emulation (speed 1, whatever the environment says) but a clock that waits for
// the segment's kernels on the current stream before it reads the time.
EmulatedDevice SegmentClockFor(const torch::Device& device, double speed, int threads);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_RANK_DEVICE_H_
