// A stand-in libnvidia-ml for tests: three GPUs this machine lacks.
// GPUs 0 and 1 share two NVLinks and a PCIe switch; GPU 2 sits across the
// CPU sockets and has no NVLink. Only the symbols the agent resolves exist.
#include <cstdio>
#include <cstring>

extern "C" {

struct nvmlDevice_st {
  unsigned index;
};
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlUtilization_t {
  unsigned int gpu, memory;
};
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
struct nvmlDeviceAttributes_t {
  unsigned int multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount,
      sharedJpegCount, sharedOfaCount, gpuInstanceSliceCount, computeInstanceSliceCount;
  unsigned long long memorySizeMB;
};

static nvmlDevice_st g_devices[3] = {{0}, {1}, {2}};
static const unsigned kCount = 3;
static const int kNotSupported = 3;
static const int kInvalidArgument = 2;

int nvmlInit_v2() { return 0; }
int nvmlShutdown() { return 0; }
int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = kCount;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t* out) {
  if (i >= kCount) return kInvalidArgument;
  *out = &g_devices[i];
  return 0;
}
int nvmlDeviceGetName(nvmlDevice_t d, char* buf, unsigned len) {
  std::snprintf(buf, len, "%s", d->index < 2 ? "Fake A100-SXM4-80GB" : "Fake T4");
  return 0;
}
int nvmlDeviceGetUUID(nvmlDevice_t d, char* buf, unsigned len) {
  std::snprintf(buf, len, "GPU-fake-%u", d->index);
  return 0;
}
int nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* m) {
  m->total = (d->index < 2 ? 80ULL : 16ULL) << 30;
  m->used = 1ULL << 30;
  m->free = m->total - m->used;
  return 0;
}
int nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* u) {
  u->gpu = 25 * d->index;
  u->memory = 0;
  return 0;
}
int nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int* major, int* minor) {
  *major = d->index < 2 ? 8 : 7;
  *minor = d->index < 2 ? 0 : 5;
  return 0;
}
int nvmlDeviceGetAttributes_v2(nvmlDevice_t d, nvmlDeviceAttributes_t* a) {
  std::memset(a, 0, sizeof(*a));
  a->multiprocessorCount = d->index < 2 ? 108 : 40;
  return 0;
}
static void FillPci(unsigned index, nvmlPciInfo_t* p) {
  std::memset(p, 0, sizeof(*p));
  p->bus = 0x10 + index;
  std::snprintf(p->busId, sizeof(p->busId), "00000000:%02X:00.0", p->bus);
}
int nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* p) {
  FillPci(d->index, p);
  return 0;
}
int nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, int* level) {
  *level = (a->index < 2 && b->index < 2) ? 10 : 50;
  return 0;
}
int nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned link, int* active) {
  if (d->index == 2) return kNotSupported;
  if (link >= 18) return kInvalidArgument;
  *active = link < 2 ? 1 : 0;
  return 0;
}
int nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned link, nvmlPciInfo_t* p) {
  if (d->index == 2 || link >= 2) return kNotSupported;
  FillPci(d->index == 0 ? 1 : 0, p);
  return 0;
}

}  // extern "C"
