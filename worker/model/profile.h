// ProfileModel: per-layer cost measurements that the planner consumes
// (the `tessera-worker profile` command prints them).
//
// For each layer, in order, in training mode, on the CPU or on the device a
// ProfileMeter measures (worker/runtime/device_profile.h: a CUDA GPU's wall
// milliseconds between synchronisations and its caching allocator's bytes):
//   fwd_ms / bwd_ms     median time of the layer's forward / backward for the
//                       whole batch over `repeats` runs (after one warm-up); on
//                       the CPU in CPU milliseconds of the computing threads
//                       (common/cpu_time.h: the calling thread's with one
//                       intra-op thread, else the process's), the clock an
//                       emulated device's busy time is measured on
//                       (worker/runtime/emulated_device.h); waiting for a
//                       host core does not count
//   fwd_flops           estimated forward FLOPs for the whole batch
//                       (Layer::ForwardFlopsPerSample x batch); also
//                       fwd_flops_per_sample
//   param_bytes         bytes of the layer's parameters
//   activation_bytes_per_sample
//                       bytes the layer's forward leaves allocated until its
//                       backward (saved tensors and outputs), measured with a
//                       counting CPU allocator (a GPU: its allocator's
//                       statistics), divided by batch
//   output_bytes_per_sample
//                       bytes of the Activation crossing a cut after this
//                       layer (main + every carry tensor), divided by batch
//   in_shape / out_shape  per-sample shape of the main tensor
// Returns {"model", "device" ("cpu", or the meter's, e.g. "cuda:0"), "batch",
// "in_shape", "repeats", "repeat_spread", "clock", "layers":[...]}; clock names
// the CPU clock ("thread_cpu" or "process_cpu") or the meter's ("cuda_wall");
// repeat_spread is (slowest - fastest) /
// median of the repeats' whole-model times (0 with one repeat).
//
// Batch-norm running statistics are restored and parameter gradients
// cleared afterwards, so the model is left as it was (training flag
// included). While it runs, the process-wide CPU allocator is wrapped by a
// counting one: call it from one thread with no concurrent torch work.
// REQUIRES: no BatchNormSync installed on the model (profiling is local).
// Errors: kInvalidArgument for batch < 1, repeats < 1, an empty or
// non-positive in_shape, or an input shape the model rejects.
#ifndef TESSERA_WORKER_MODEL_PROFILE_H_
#define TESSERA_WORKER_MODEL_PROFILE_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/model/layered_model.h"

namespace tessera::worker {

// Each timed call of a profile starts with the layer's weights and inputs out of
// the per-core caches, as a rank's compute does in training: other ranks of the
// host run between its segments, and a GPU reads its weights from device memory on
// every kernel too. Writes a buffer larger than a core's L2 (not a tensor, so not
// counted). Thread safety: one thread at a time.
void EvictCpuCaches();

// How a profile times work and counts the memory it takes on one device.
// Thread safety: one thread, no concurrent torch work.
class ProfileMeter {
 public:
  virtual ~ProfileMeter() = default;
  // Where the profiled model's parameters and its inputs live.
  virtual torch::Device device() const = 0;
  // The clock's name in the profile's "clock" ("thread_cpu", "cuda_wall", ...).
  virtual std::string clock_name() const = 0;
  // Readies a timed call (the CPU: caches evicted; a GPU: queued work finished)
  // and returns its start, for ElapsedMs.
  virtual double Start() = 0;
  // Milliseconds from `start` to the end of the work issued since (a GPU: waits
  // for it).
  virtual double ElapsedMs(double start) = 0;
  // Bytes of the device's tensors alive now, and the most since ResetPeak().
  virtual int64_t LiveBytes() = 0;
  virtual int64_t PeakBytes() = 0;
  virtual void ResetPeak() = 0;
};

// The CPU's meter: CPU milliseconds of the computing threads on the clock an
// emulated device with torch's current intra-op thread count measures
// (common/cpu_time.h), each call with the caches evicted; memory from the
// counting CPU allocator, installed while the meter lives (without
// count_memory: not installed, and the bytes read 0).
std::unique_ptr<ProfileMeter> MakeCpuProfileMeter(bool count_memory = true);

// in_shape: per-sample input shape, e.g. {1, 64, 64} for colorize-unet.
// Measured on the CPU (MakeCpuProfileMeter).
Result<nlohmann::json> ProfileModel(LayeredModel& model, int64_t batch,
                                    const std::vector<int64_t>& in_shape, int repeats);
// The same measured by `meter`: times and memory of meter.device(), whose
// name is the profile's "device" ("cpu", "cuda:0") and whose clock its "clock".
// REQUIRES: the model's parameters are on meter.device().
Result<nlohmann::json> ProfileModel(ProfileMeter& meter, LayeredModel& model, int64_t batch,
                                    const std::vector<int64_t>& in_shape, int repeats);

// Counts the bytes of CPU tensors allocated while it lives, with the counting
// allocator ProfileModel uses (installed in front of the current CPU allocator for
// its lifetime; inside another counting scope it counts through that one). For
// profiles of whole training steps (the GAN's, worker/runtime/gan_profile.h).
// Thread safety: as ProfileModel: one thread, no concurrent torch work.
class AllocationCounter {
 public:
  AllocationCounter();
  ~AllocationCounter();
  AllocationCounter(const AllocationCounter&) = delete;
  AllocationCounter& operator=(const AllocationCounter&) = delete;
  // Bytes of counted tensors alive now (tensors made before the first counter
  // was installed are not counted).
  int64_t live_bytes() const;
  // Largest live_bytes() since the last ResetPeak().
  int64_t peak_bytes() const;
  void ResetPeak();

 private:
  struct Scope;
  Scope* scope_;
};

// Splits each layer's measured time into a per-call part and a per-sample part from
// `profile` (batch B) and `smaller`, profiles of the same model at smaller batches:
// time(batch) = fixed + batch x per_sample, fitted by least squares through every
// point (B and each smaller batch), fixed clamped to [0, ms(B)]. Two points give the
// line through both; more points average out the noise of any one measurement.
// Adds "fwd_fixed_ms" and "bwd_fixed_ms" to every layer of `profile` and
// "fixed_batch": the smallest batch; the rest of `profile` is unchanged (older
// readers ignore the new fields).
// Errors: kInvalidArgument when `smaller` is empty, the layer lists differ, or a
// batch is not smaller than B.
Result<nlohmann::json> WithFixedCosts(nlohmann::json profile,
                                      const std::vector<nlohmann::json>& smaller);

// The batches the per-call fit measures besides B: `smallest` and, when there is
// room, one between it and B (their geometric mean), so the line rests on three
// points. REQUIRES: 1 <= smallest < batch.
std::vector<int64_t> FixedCostBatches(int64_t smallest, int64_t batch);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_MODEL_PROFILE_H_
