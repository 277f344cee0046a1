#include "daemon/store/faulty_store.h"

#include <utility>

namespace tessera::daemon {

#define TESSERA_FAULT_(kind)         \
  do {                               \
    Status fault_ = Next##kind();    \
    if (!fault_.ok()) return fault_; \
  } while (0)

void FaultyStore::ArmWriteFault(int64_t nth, Status status, bool sticky) {
  MutexLock lock(mu_);
  write_fault_ = Fault{writes_seen_.load() + nth, std::move(status), sticky};
}

void FaultyStore::ArmReadFault(int64_t nth, Status status, bool sticky) {
  MutexLock lock(mu_);
  read_fault_ = Fault{reads_seen_.load() + nth, std::move(status), sticky};
}

void FaultyStore::Disarm() {
  MutexLock lock(mu_);
  write_fault_.reset();
  read_fault_.reset();
}

Status FaultyStore::Check(const std::optional<Fault>& fault, int64_t call) {
  if (!fault) return Status::Ok();
  if (call == fault->at || (fault->sticky && call > fault->at)) return fault->status;
  return Status::Ok();
}

Status FaultyStore::NextWrite() {
  MutexLock lock(mu_);
  return Check(write_fault_, ++writes_seen_);
}

Status FaultyStore::NextRead() {
  MutexLock lock(mu_);
  return Check(read_fault_, ++reads_seen_);
}

// Each row method: counted as a read or a write, failed when armed, else
// passed to the wrapped store.
#define TESSERA_FAULTY_FORWARD_(kind, ret, name, params, args) \
  ret FaultyStore::name params {                               \
    TESSERA_FAULT_(kind);                                      \
    return base_->name args;                                   \
  }
TESSERA_STORE_METHODS(TESSERA_FAULTY_FORWARD_)
#undef TESSERA_FAULTY_FORWARD_

}  // namespace tessera::daemon
