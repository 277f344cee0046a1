#include "agent/nvml_discovery.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <map>

#include "common/enum_names.h"

namespace tessera::agent {
// Named (not anonymous) so NvmlLibrary::Api, which has external linkage, may
// use these types.
namespace nvml_abi {

// ---- The slice of the NVML C API we use (stable ABI, nvml.h) ----
using nvmlReturn_t = int;
constexpr nvmlReturn_t kNvmlSuccess = 0;
using nvmlDevice_t = struct nvmlDevice_st*;
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};
struct nvmlDeviceAttributes_t {
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
  unsigned int gpuInstanceSliceCount;
  unsigned int computeInstanceSliceCount;
  unsigned long long memorySizeMB;
};
using nvmlEnableState_t = int;  // 0 disabled, 1 enabled
using nvmlGpuTopologyLevel_t = int;
constexpr unsigned kNvlinkMaxLinks = 18;

constexpr EnumName<nvmlGpuTopologyLevel_t> kTopologyNames[] = {
    {0, "internal"},    {10, "single"}, {20, "multiple"},
    {30, "hostbridge"}, {40, "node"},   {50, "system"},
};
static_assert(IsValidNameTable(kTopologyNames));

std::string TopologyName(nvmlGpuTopologyLevel_t level) {
  return std::string(NameOf(kTopologyNames, level, ""));
}

}  // namespace nvml_abi

using namespace nvml_abi;  // NOLINT: local to this file's definitions below

struct NvmlLibrary::Api {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*get_count)(unsigned int*) = nullptr;
  nvmlReturn_t (*get_handle)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*get_name)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*get_uuid)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*get_memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  // Optional symbols: a missing one leaves its figure unset.
  nvmlReturn_t (*get_utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*get_capability)(nvmlDevice_t, int*, int*) = nullptr;
  nvmlReturn_t (*get_attributes)(nvmlDevice_t, nvmlDeviceAttributes_t*) = nullptr;
  nvmlReturn_t (*get_pci)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*get_common_ancestor)(nvmlDevice_t, nvmlDevice_t,
                                      nvmlGpuTopologyLevel_t*) = nullptr;
  nvmlReturn_t (*get_nvlink_state)(nvmlDevice_t, unsigned int, nvmlEnableState_t*) = nullptr;
  nvmlReturn_t (*get_nvlink_remote_pci)(nvmlDevice_t, unsigned int, nvmlPciInfo_t*) = nullptr;
};

namespace {

template <typename Fn>
void Resolve(void* handle, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
}

template <typename Fn>
void ResolveFirst(void* handle, std::initializer_list<const char*> names, Fn* out) {
  for (const char* name : names) {
    Resolve(handle, name, out);
    if (*out != nullptr) return;
  }
}

std::string PciKey(const nvmlPciInfo_t& pci) {
  // Normalise: lower case, 8-digit domain ("00000000:3B:00.0" vs "0000:3b:00.0").
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%x:%x:%x", pci.domain, pci.bus, pci.device);
  return buf;
}

}  // namespace

NvmlLibrary::NvmlLibrary(void* handle, std::unique_ptr<Api> api)
    : handle_(handle), api_(std::move(api)) {}

NvmlLibrary::~NvmlLibrary() {
  if (api_ && api_->shutdown) api_->shutdown();
  if (handle_) dlclose(handle_);
}

Result<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Open(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return std::unique_ptr<NvmlLibrary>();  // no driver: no GPUs
  auto api = std::make_unique<Api>();
  ResolveFirst(handle, {"nvmlInit_v2", "nvmlInit"}, &api->init);
  Resolve(handle, "nvmlShutdown", &api->shutdown);
  ResolveFirst(handle, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"}, &api->get_count);
  ResolveFirst(handle, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"},
               &api->get_handle);
  Resolve(handle, "nvmlDeviceGetName", &api->get_name);
  Resolve(handle, "nvmlDeviceGetUUID", &api->get_uuid);
  Resolve(handle, "nvmlDeviceGetMemoryInfo", &api->get_memory);
  Resolve(handle, "nvmlDeviceGetUtilizationRates", &api->get_utilization);
  Resolve(handle, "nvmlDeviceGetCudaComputeCapability", &api->get_capability);
  Resolve(handle, "nvmlDeviceGetAttributes_v2", &api->get_attributes);
  ResolveFirst(handle, {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2"}, &api->get_pci);
  Resolve(handle, "nvmlDeviceGetTopologyCommonAncestor", &api->get_common_ancestor);
  Resolve(handle, "nvmlDeviceGetNvLinkState", &api->get_nvlink_state);
  ResolveFirst(handle, {"nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNvLinkRemotePciInfo"},
               &api->get_nvlink_remote_pci);
  for (auto [name, fn] :
       {std::pair{"nvmlInit_v2", reinterpret_cast<void*>(api->init)},
        {"nvmlShutdown", reinterpret_cast<void*>(api->shutdown)},
        {"nvmlDeviceGetCount_v2", reinterpret_cast<void*>(api->get_count)},
        {"nvmlDeviceGetHandleByIndex_v2", reinterpret_cast<void*>(api->get_handle)},
        {"nvmlDeviceGetName", reinterpret_cast<void*>(api->get_name)},
        {"nvmlDeviceGetUUID", reinterpret_cast<void*>(api->get_uuid)},
        {"nvmlDeviceGetMemoryInfo", reinterpret_cast<void*>(api->get_memory)}}) {
    if (fn == nullptr) {
      dlclose(handle);
      return Internal(library + " lacks " + name);
    }
  }
  if (api->init() != kNvmlSuccess) {
    // Library present but no working driver (e.g. container without GPUs).
    dlclose(handle);
    return std::unique_ptr<NvmlLibrary>();
  }
  return std::unique_ptr<NvmlLibrary>(new NvmlLibrary(handle, std::move(api)));
}

Result<GpuDiscovery> NvmlLibrary::Discover() {
  GpuDiscovery out;
  unsigned int count = 0;
  if (api_->get_count(&count) != kNvmlSuccess) return Internal("nvmlDeviceGetCount failed");
  std::vector<nvmlDevice_t> handles(count, nullptr);
  std::vector<std::string> pci_keys(count);
  for (unsigned int i = 0; i < count; ++i) {
    if (api_->get_handle(i, &handles[i]) != kNvmlSuccess) {
      return Internal("nvmlDeviceGetHandleByIndex(" + std::to_string(i) + ") failed");
    }
    api::Device d;
    d.index = i;
    d.type = "cuda";
    char buf[256] = {};
    if (api_->get_name(handles[i], buf, sizeof(buf)) == kNvmlSuccess) d.name = buf;
    std::memset(buf, 0, sizeof(buf));
    if (api_->get_uuid(handles[i], buf, sizeof(buf)) == kNvmlSuccess) d.uuid = buf;
    nvmlMemory_t mem{};
    if (api_->get_memory(handles[i], &mem) == kNvmlSuccess) {
      d.memory_bytes = static_cast<int64_t>(mem.total);
      d.memory_used_bytes = static_cast<int64_t>(mem.used);
    }
    if (api_->get_utilization) {
      nvmlUtilization_t u{};
      if (api_->get_utilization(handles[i], &u) == kNvmlSuccess) d.utilization = u.gpu / 100.0;
    }
    if (api_->get_capability) {
      int major = 0, minor = 0;
      if (api_->get_capability(handles[i], &major, &minor) == kNvmlSuccess) {
        d.compute_capability = std::to_string(major) + "." + std::to_string(minor);
      }
    }
    if (api_->get_attributes) {
      nvmlDeviceAttributes_t attrs{};
      if (api_->get_attributes(handles[i], &attrs) == kNvmlSuccess) {
        d.sm_count = attrs.multiprocessorCount;
      }
    }
    if (api_->get_pci) {
      nvmlPciInfo_t pci{};
      if (api_->get_pci(handles[i], &pci) == kNvmlSuccess) pci_keys[i] = PciKey(pci);
    }
    out.devices.push_back(std::move(d));
  }
  // NVLinks: for each GPU, the PCI address at the far end of every active link.
  std::vector<std::map<std::string, int64_t>> nvlinks_to(count);
  if (api_->get_nvlink_state && api_->get_nvlink_remote_pci) {
    for (unsigned int i = 0; i < count; ++i) {
      for (unsigned int link = 0; link < kNvlinkMaxLinks; ++link) {
        nvmlEnableState_t active = 0;
        if (api_->get_nvlink_state(handles[i], link, &active) != kNvmlSuccess) break;
        if (!active) continue;
        nvmlPciInfo_t remote{};
        if (api_->get_nvlink_remote_pci(handles[i], link, &remote) == kNvmlSuccess) {
          nvlinks_to[i][PciKey(remote)]++;
        }
      }
    }
  }
  for (unsigned int a = 0; a < count; ++a) {
    for (unsigned int b = a + 1; b < count; ++b) {
      DeviceLink link;
      link.a = a;
      link.b = b;
      if (api_->get_common_ancestor) {
        nvmlGpuTopologyLevel_t level = 0;
        if (api_->get_common_ancestor(handles[a], handles[b], &level) == kNvmlSuccess) {
          link.topology = TopologyName(level);
          link.kind = level >= 50 ? LinkKind::kSystem : LinkKind::kPcie;
        }
      }
      if (!pci_keys[b].empty()) {
        auto it = nvlinks_to[a].find(pci_keys[b]);
        if (it != nvlinks_to[a].end()) link.nvlink_count = it->second;
      }
      if (link.nvlink_count > 0) link.kind = LinkKind::kNvLink;
      out.links.push_back(std::move(link));
    }
  }
  return out;
}

bool NvmlLibrary::Sample(int64_t index, double* utilization, int64_t* memory_used_bytes) {
  nvmlDevice_t handle = nullptr;
  if (index < 0 || api_->get_handle(static_cast<unsigned>(index), &handle) != kNvmlSuccess) {
    return false;
  }
  bool any = false;
  if (api_->get_utilization) {
    nvmlUtilization_t u{};
    if (api_->get_utilization(handle, &u) == kNvmlSuccess) {
      *utilization = u.gpu / 100.0;
      any = true;
    }
  }
  nvmlMemory_t mem{};
  if (api_->get_memory(handle, &mem) == kNvmlSuccess) {
    *memory_used_bytes = static_cast<int64_t>(mem.used);
    any = true;
  }
  return any;
}

Result<GpuDiscovery> DiscoverNvmlGpus(const std::string& library) {
  TESSERA_ASSIGN_OR_RETURN(auto nvml, NvmlLibrary::Open(library));
  if (!nvml) return GpuDiscovery{};
  return nvml->Discover();
}

}  // namespace tessera::agent
