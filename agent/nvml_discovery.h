// NVML discovery: NVIDIA GPUs of this node, found through libnvidia-ml loaded
// at run time (dlopen), so the agent builds and runs on machines without the
// driver. The few NVML types and prototypes used are declared in the .cc; no
// NVML header is needed.
//
// Thread safety: NvmlLibrary is safe to use from one thread at a time.
#ifndef TESSERA_AGENT_NVML_DISCOVERY_H_
#define TESSERA_AGENT_NVML_DISCOVERY_H_

#include <memory>
#include <string>
#include <vector>

#include "agent/inventory.h"
#include "common/status.h"

namespace tessera::agent {

struct GpuDiscovery {
  std::vector<api::Device> devices;  // type "cuda", index = NVML index
  std::vector<DeviceLink> links;     // every pair (a < b)
};

// A loaded libnvidia-ml with NVML initialised; shut down on destruction.
class NvmlLibrary {
 public:
  // Loads `library` ("libnvidia-ml.so.1" or a path). Returns nullptr (not an
  // error) when the library is absent or nvmlInit fails: the node has no
  // usable NVIDIA GPUs. Returns an error only when the library loads but
  // lacks a required symbol.
  static Result<std::unique_ptr<NvmlLibrary>> Open(const std::string& library);
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  // All GPUs with static facts (name, uuid, memory, capability, SMs) and the
  // links between each pair.
  Result<GpuDiscovery> Discover();

  // Live figures of GPU `index`: utilization 0..1 and memory used; false when
  // NVML cannot answer.
  bool Sample(int64_t index, double* utilization, int64_t* memory_used_bytes);

  struct Api;  // resolved function pointers (defined in the .cc)

 private:
  NvmlLibrary(void* handle, std::unique_ptr<Api> api);
  void* handle_;
  std::unique_ptr<Api> api_;
};

// Convenience: Open + Discover; absent library -> empty discovery.
Result<GpuDiscovery> DiscoverNvmlGpus(const std::string& library = "libnvidia-ml.so.1");

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_NVML_DISCOVERY_H_
