#include "worker/runtime/emulated_memory.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>
#include <malloc.h>

#include <atomic>
#include <cstdio>
#include <string>

namespace tessera::worker {
namespace {

std::atomic<int64_t> g_limit{0};
std::atomic<int64_t> g_in_use{0};
std::atomic<int64_t> g_peak{0};
std::atomic<bool> g_installed{false};
thread_local int t_host_scopes = 0;  // HostMemoryScope depth of this thread

std::string Mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

void CountedFree(void* p) {
  if (p == nullptr) return;
  g_in_use.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  c10::free_cpu(p);
}

class CountingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    void* p = c10::alloc_cpu(n);  // throws on a real host allocation failure
    if (t_host_scopes > 0) return {p, p, &c10::free_cpu, c10::Device(c10::DeviceType::CPU)};
    const auto size = static_cast<int64_t>(p ? malloc_usable_size(p) : 0);
    const int64_t now = g_in_use.fetch_add(size, std::memory_order_relaxed) + size;
    const int64_t limit = g_limit.load(std::memory_order_relaxed);
    if (limit > 0 && now > limit) {
      CountedFree(p);
      TORCH_CHECK_WITH(OutOfMemoryError, false, "emulated device out of memory: tried to allocate ",
                       Mib(static_cast<int64_t>(n)), " with ", Mib(now - size), " in use of ",
                       Mib(limit), " (the device's declared memory, TESSERA_DEVICE_MEMORY)");
    }
    int64_t peak = g_peak.load(std::memory_order_relaxed);
    while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
    return {p, p, &CountedFree, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &CountedFree; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

CountingCpuAllocator g_allocator;

}  // namespace

HostMemoryScope::HostMemoryScope() { ++t_host_scopes; }
HostMemoryScope::~HostMemoryScope() { --t_host_scopes; }

Status ComputeFailure(std::string_view context, const std::exception& e) {
  std::string what = e.what();
  if (const auto* c10e = dynamic_cast<const c10::Error*>(&e)) what = c10e->what_without_backtrace();
  std::string msg = std::string(context) + ": " + what;
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr) {
    return ResourceExhausted(std::move(msg));
  }
  return Internal(std::move(msg));
}

void EmulatedMemory::Install(int64_t limit_bytes) {
  g_limit.store(limit_bytes > 0 ? limit_bytes : 0);
  if (!g_installed.exchange(true)) {
    // Priority above the default CPU allocator's, so this one stays in front.
    c10::SetAllocator(c10::DeviceType::CPU, &g_allocator, /*priority=*/1);
  }
}

bool EmulatedMemory::installed() { return g_installed.load(); }
int64_t EmulatedMemory::limit_bytes() { return g_limit.load(); }
int64_t EmulatedMemory::in_use_bytes() { return g_in_use.load(); }
int64_t EmulatedMemory::peak_bytes() { return g_peak.load(); }
void EmulatedMemory::ResetPeak() { g_peak.store(g_in_use.load()); }

}  // namespace tessera::worker
