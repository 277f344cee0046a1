// CollectivesBatchNormSync: the BatchNormSync (worker/model/layered_model.h)
// the runtime installs on data-parallel replicas: an all-reduce (sum) of the
// batch-norm moments over one process group, so every replica normalises
// with the statistics of the whole batch. The tensors of one call travel in one
// all-reduce (packed when they share a dtype).
//
// Ownership: borrows the Collectives, which must outlive it.
// Thread safety: as the Collectives (one thread).
#ifndef TESSERA_WORKER_RUNTIME_BATCH_NORM_SYNC_H_
#define TESSERA_WORKER_RUNTIME_BATCH_NORM_SYNC_H_

#include <vector>

#include "worker/model/layered_model.h"
#include "worker/runtime/collectives.h"

namespace tessera::worker {

class CollectivesBatchNormSync : public BatchNormSync {
 public:
  explicit CollectivesBatchNormSync(Collectives* comm) : comm_(comm) {}
  // Throws std::runtime_error when the all-reduce fails (it runs inside
  // autograd, which has no Status channel); the trainer catches it.
  void AllReduceSum(std::vector<torch::Tensor>& tensors) override;

 private:
  Collectives* comm_;
};

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_BATCH_NORM_SYNC_H_
