#include "scheduler/plan.h"

namespace tessera::scheduler {

std::vector<DeviceId> Plan::Devices() const {
  std::vector<DeviceId> out;
  for (const Replica& r : replicas) {
    for (const Stage& s : r.stages) out.insert(out.end(), s.devices.begin(), s.devices.end());
  }
  return out;
}

}  // namespace tessera::scheduler
