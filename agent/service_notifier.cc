#include "agent/service_notifier.h"

#include <systemd/sd-daemon.h>

#include <cstdint>

namespace tessera::agent {

void SystemdNotifier::Ready() { sd_notify(0, "READY=1"); }
void SystemdNotifier::Watchdog() { sd_notify(0, "WATCHDOG=1"); }
void SystemdNotifier::Stopping() { sd_notify(0, "STOPPING=1"); }
void SystemdNotifier::SetStatus(const std::string& text) {
  sd_notify(0, ("STATUS=" + text).c_str());
}

std::chrono::microseconds SystemdNotifier::WatchdogPingInterval() {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    return std::chrono::microseconds(static_cast<int64_t>(usec / 2));
  }
  return std::chrono::microseconds(0);
}

}  // namespace tessera::agent
