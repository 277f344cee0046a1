#include "scheduler/plan.h"

namespace tessera::scheduler {

std::string_view ScheduleName(Schedule s) { return s == Schedule::kGPipe ? "gpipe" : "1f1b"; }

std::vector<DeviceId> Plan::Devices() const {
  std::vector<DeviceId> out;
  for (const Replica& r : replicas) {
    for (const Stage& s : r.stages) out.insert(out.end(), s.devices.begin(), s.devices.end());
  }
  return out;
}

}  // namespace tessera::scheduler
