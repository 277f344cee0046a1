// FaultyStore: wraps another Store and fails a chosen read or write, for
// tests of error paths (a full disk, a busy database, a lost connection).
//
// Every Store method is classified as a read or a write (Health and Stats are
// neither and never fail). ArmWriteFault(n, s) makes the n-th write from now
// (1-based) return `s` without reaching the wrapped store; ArmReadFault
// likewise for reads. With `sticky`, that write and every later one fails
// until Disarm(). Calls that are not failed pass through unchanged.
//
// Ownership: does not own the wrapped store, which must outlive it.
// Thread safety: as safe as the wrapped store; the counters are atomic and
// the armed faults are GUARDED_BY a mutex.
#ifndef TESSERA_DAEMON_STORE_FAULTY_STORE_H_
#define TESSERA_DAEMON_STORE_FAULTY_STORE_H_

#include <atomic>
#include <cstdint>
#include <optional>

#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "daemon/store/store.h"
#include "daemon/store/store_methods.h"

namespace tessera::daemon {

class FaultyStore final : public Store {
 public:
  // REQUIRES: base != nullptr.
  explicit FaultyStore(Store* base) : base_(base) {}

  // REQUIRES: nth >= 1; status not OK.
  void ArmWriteFault(int64_t nth, Status status, bool sticky = false) EXCLUDES(mu_);
  void ArmReadFault(int64_t nth, Status status, bool sticky = false) EXCLUDES(mu_);
  void Disarm() EXCLUDES(mu_);
  // Calls seen since construction (failed ones included).
  int64_t writes_seen() const { return writes_seen_.load(); }
  int64_t reads_seen() const { return reads_seen_.load(); }

  Status Health() override { return base_->Health(); }

  // Every row method of the Store (daemon/store/store_methods.h).
  TESSERA_STORE_METHODS(TESSERA_STORE_OVERRIDE)

  StoreStats Stats() override { return base_->Stats(); }

 private:
  struct Fault {
    int64_t at = 0;  // absolute call number that fails first
    Status status;
    bool sticky = false;
  };
  // The fault for this call, or OK to pass through.
  Status NextWrite() EXCLUDES(mu_);
  Status NextRead() EXCLUDES(mu_);
  static Status Check(const std::optional<Fault>& fault, int64_t call);

  Store* const base_;
  std::atomic<int64_t> writes_seen_{0};
  std::atomic<int64_t> reads_seen_{0};
  Mutex mu_;
  std::optional<Fault> write_fault_ GUARDED_BY(mu_);
  std::optional<Fault> read_fault_ GUARDED_BY(mu_);
};

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_STORE_FAULTY_STORE_H_
