// GradReducer: DDP-style bucketed gradient all-reduce that overlaps backward.
//
// Parameters are grouped by owner set (the ranks that own a layer, one per
// replica); each group's parameters are packed into buckets of about
// `bucket_bytes` in reverse registration order (the order backward produces
// them). A hook on every parameter copies the gradient (plus what earlier
// micro-batches accumulated) into its bucket slot; when a bucket is full it is
// launched as an async SUM all-reduce, strictly in bucket order so every
// member issues the same sequence of collectives. Finish() launches what is
// left (parameters that got no gradient contribute zeros or their
// accumulated gradient), waits, and writes the reduced sums back to .grad.
//
// Gradients are not averaged: the trainer scales each micro-batch loss by
// micro_batch / global_batch, so the SUM over replicas is the full-batch
// gradient whatever the batch shares are.
//
// Hooks act only while armed (the last backward of a step); earlier
// micro-batches accumulate locally, like DDP's no_sync().
// Thread safety: hooks run on the autograd thread; Arm/Finish on the caller's.
#ifndef TESSERA_WORKER_RUNTIME_GRAD_REDUCER_H_
#define TESSERA_WORKER_RUNTIME_GRAD_REDUCER_H_

#include <torch/torch.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "worker/runtime/collectives.h"

namespace tessera::worker {

class GradReducer {
 public:
  GradReducer() = default;
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;
  ~GradReducer();

  // Registers the parameters of one owner group (in forward order) reduced
  // over `comm`. A group of size 1 is ignored. REQUIRES: every member passes
  // the same names in the same order.
  void AddGroup(Collectives* comm, std::vector<std::pair<std::string, torch::Tensor>> params,
                size_t bucket_bytes);

  // Starts accepting gradients from hooks (call before the last backward).
  void Arm();
  // Launches remaining buckets, waits, writes results to .grad, disarms.
  // Returns the time spent waiting, in seconds, through *wait_s.
  Status Finish(double* wait_s);

  size_t num_buckets() const;

 private:
  struct Slot {
    torch::Tensor param;
    int64_t offset = 0;
    int64_t numel = 0;
    bool filled = false;
  };
  struct Bucket {
    torch::Tensor flat;
    std::vector<size_t> slots;
    size_t pending = 0;
    std::unique_ptr<CommWork> work;
    bool launched = false;
  };
  struct Group {
    Collectives* comm = nullptr;
    std::vector<Slot> slots;
    std::vector<Bucket> buckets;
    std::vector<size_t> slot_bucket;
    size_t next_launch = 0;
    Status error;
  };
  void OnGrad(size_t group, size_t slot, const torch::Tensor& grad);
  void LaunchReady(Group& g);
  void ResetGroup(Group& g);

  std::vector<std::unique_ptr<Group>> groups_;
  bool armed_ = false;
  std::vector<std::pair<torch::Tensor, unsigned>> hooks_;
};

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_GRAD_REDUCER_H_
