// EmulatedMemory: the declared memory of an emulated device, enforced on the
// tensors a rank allocates on the host.
//
// Purpose: a rank on an emulated device computes with CPU tensors; a GPU would
// fail once its tensors exceed its memory, so the emulated one must too.
// Install() puts a counting allocator in front of LibTorch's default CPU
// allocator (c10::SetAllocator, the hook c10 provides for that): every CPU
// tensor's storage is counted while it lives (by the allocator's usable size),
// the peak is kept, and an allocation that would take the bytes in use over the
// limit throws c10::OutOfMemoryError — what a CUDA out-of-memory throws — with
// a message naming the request, the bytes in use and the limit.
// What counts: parameters, gradients, optimizer state, activations, input
// batches, communication buffers: every CPU tensor of the process (a GPU's own
// bookkeeping and the framework's non-tensor heap do not count, as they would
// not on a GPU either).
//
// Host memory: tensors a thread allocates inside a HostMemoryScope (the
// inference pipeline's decode and encode threads: images read and written,
// which a GPU box keeps in host RAM) are neither counted nor limited; the
// compute thread's copies of them (the batch it stacks) are.
//
// Ownership: one process-wide allocator of static lifetime; Install() is called
// once, before the model is built (tensors made earlier are freed by their own
// deleter and never counted). Thread safety: the counters are atomic; every
// function may be called from any thread.
#ifndef TESSERA_WORKER_RUNTIME_EMULATED_MEMORY_H_
#define TESSERA_WORKER_RUNTIME_EMULATED_MEMORY_H_

#include <cstdint>
#include <exception>
#include <string_view>

#include "common/status.h"

namespace tessera::worker {

class EmulatedMemory {
 public:
  // Installs the counting CPU allocator; limit_bytes <= 0 counts without a limit.
  // Calling it again changes the limit only.
  static void Install(int64_t limit_bytes);
  static bool installed();
  static int64_t limit_bytes();
  static int64_t in_use_bytes();
  // Largest in_use_bytes() since Install() or the last ResetPeak().
  static int64_t peak_bytes();
  static void ResetPeak();
};

// While one lives, the calling thread's CPU tensors are host memory (see the
// file comment). Scopes nest; not movable.
class HostMemoryScope {
 public:
  HostMemoryScope();
  ~HostMemoryScope();
  HostMemoryScope(const HostMemoryScope&) = delete;
  HostMemoryScope& operator=(const HostMemoryScope&) = delete;
};

// The Status for an exception that compute threw: kResourceExhausted for an
// out-of-memory (emulated or CUDA), kInternal otherwise; the message is
// "<context>: <what>" without LibTorch's backtrace.
Status ComputeFailure(std::string_view context, const std::exception& e);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_EMULATED_MEMORY_H_
