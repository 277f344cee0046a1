// ServiceNotifier: tells the service manager how the agent is doing.
// SystemdNotifier speaks sd_notify (READY=1 after the first successful
// heartbeat, WATCHDOG=1 pings, STOPPING=1 on exit, STATUS=...); outside
// systemd (no NOTIFY_SOCKET) every call is a no-op.
// Thread safety: all methods are safe to call from any thread.
#ifndef TESSERA_AGENT_SERVICE_NOTIFIER_H_
#define TESSERA_AGENT_SERVICE_NOTIFIER_H_

#include <chrono>
#include <string>

namespace tessera::agent {

class ServiceNotifier {
 public:
  virtual ~ServiceNotifier() = default;
  virtual void Ready() = 0;
  virtual void Watchdog() = 0;
  virtual void Stopping() = 0;
  virtual void SetStatus(const std::string& text) = 0;
};

class SystemdNotifier final : public ServiceNotifier {
 public:
  void Ready() override;
  void Watchdog() override;
  void Stopping() override;
  void SetStatus(const std::string& text) override;
  // Half of WATCHDOG_USEC when systemd watches this process, else zero.
  static std::chrono::microseconds WatchdogPingInterval();
};

class NullNotifier final : public ServiceNotifier {
 public:
  void Ready() override {}
  void Watchdog() override {}
  void Stopping() override {}
  void SetStatus(const std::string&) override {}
};

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_SERVICE_NOTIFIER_H_
