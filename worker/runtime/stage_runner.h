// StageRunner: one rank's forward and backward work for one optimizer step,
// for every layout (data parallel is a pipeline of one stage).
//
// The replica's batch share is split into micro-batches; each micro-batch's
// loss is scaled by micro_batch_size / global_batch so the gradients summed
// over micro-batches and then over replicas (GradReducer) equal the gradient
// of the mean loss over the whole global batch.
//
// Between stages an Activation travels as: a header (int64 [kHeaderLen]:
// count, then per tensor dtype, ndim, dims) and then each tensor; gradients
// come back for every floating tensor in the same order. Sends are
// asynchronous, receives block. A send is waited (its buffers freed) once the
// schedule shows the peer has received it: activation sends of micro-batch i
// when i's gradient comes back, gradient sends (1F1B) when the previous stage's
// activation shows it ran their backward; the rest at the end of the step.
// Schedules:
//   GPipe: F0 F1 ... F(M-1) then B0 ... B(M-1)
//   1F1B:  min(S-s-1, M) warm-up forwards, then alternate F and B, then drain.
// The reducer is armed before the last backward, so bucket all-reduces
// overlap that backward.
//
// Thread safety: not thread-safe; one runner per rank.
#ifndef TESSERA_WORKER_RUNTIME_STAGE_RUNNER_H_
#define TESSERA_WORKER_RUNTIME_STAGE_RUNNER_H_

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <vector>

#include "common/status.h"
#include "worker/model/layered_model.h"
#include "worker/runtime/collectives.h"
#include "worker/runtime/data_source.h"
#include "worker/runtime/emulated_device.h"
#include "worker/runtime/grad_reducer.h"
#include "worker/runtime/plan.h"

namespace tessera::worker {

constexpr int64_t kHeaderLen = 256;

struct StageConfig {
  LayeredModel* model = nullptr;
  RankRole role;
  int64_t global_batch = 0;
  int64_t micro_batches = 1;  // EffectiveMicroBatches(plan)
  Schedule schedule = Schedule::k1F1B;
  // Point-to-point, ranks are world ranks. Activations go forward over `p2p`,
  // gradients come back over `p2p_back` (a second world group; null: `p2p` too).
  // NCCL runs a pair's operations of one group in issue order on one stream, so
  // with one group 1F1B would deadlock: a stage sends activation k+1 before it
  // receives gradient 0, while the next stage sends gradient 0 before it
  // receives activation k+1. In a group per direction each carries one kind of
  // message, issued in the same order on both sides.
  Collectives* p2p = nullptr;
  Collectives* p2p_back = nullptr;
  BatchSource* data = nullptr;
  GradReducer* reducer = nullptr;  // may be null (no replicas)
  // Emulated device: every forward and backward is a compute segment that lasts
  // its CPU work / speed (worker/runtime/emulated_device.h).
  EmulatedDevice emulated;
  torch::Device device = torch::kCPU;
  // Where p2p buffers live: CPU for Gloo, the GPU for NCCL.
  torch::Device comm_device = torch::kCPU;
  // Mixed precision: autocast around the forward (CUDA builds only) and a
  // loss multiplier for loss scaling (1 = off); gradients come out scaled.
  bool autocast = false;
  double loss_scale = 1.0;
};

struct StepStats {
  double loss_contribution = 0;  // sum over micro-batches of scaled losses (last stage)
  double compute_s = 0;          // forward, backward (busy time of the device)
  double compute_cpu_s = 0;      // CPU seconds of that compute
  double comm_s = 0;             // waiting for gradient all-reduce and sends
  double bubble_s = 0;           // waiting for a neighbour stage's activations or gradients
};

class StageRunner {
 public:
  explicit StageRunner(StageConfig config) : c_(std::move(config)) {}
  void set_loss_scale(double scale) { c_.loss_scale = scale; }
  // Runs forward and backward of all micro-batches of one step whose global
  // batch starts at sample `step_first_id`; the reduced gradients are left in
  // the parameters' .grad.
  Result<StepStats> RunStep(int64_t step_first_id);

 private:
  struct InFlight {
    std::vector<torch::Tensor> inputs;   // leaves that received activations (non-first stage)
    std::vector<torch::Tensor> outputs;  // tensors sent on (non-last stage)
    torch::Tensor loss;                  // last stage
  };
  Status Forward(int64_t step_first_id, int64_t mb);
  Status Backward(int64_t mb);
  // Waits for (and frees the buffers of) the activation (forward) or gradient sends
  // of micro-batches <= up_to, which the schedule guarantees are received already;
  // the first failed send's status.
  Status WaitSends(bool forward, int64_t up_to);
  Collectives& BackP2p() { return c_.p2p_back != nullptr ? *c_.p2p_back : *c_.p2p; }
  // Ends a compute segment (holding an emulated device) and adds it to the step.
  void EndCompute(const EmulatedDevice::Segment& start);

  StageConfig c_;
  std::vector<int64_t> sizes_;
  std::vector<int64_t> offsets_;
  std::vector<InFlight> flight_;
  struct PendingSend {
    bool forward = true;  // activation to the next stage; false: gradient to the previous
    int64_t micro_batch = 0;
    std::unique_ptr<CommWork> work;
  };
  std::vector<PendingSend> sends_;
  StepStats stats_;
};

// Activation <-> flat tensor list with header, exposed for tests.
Result<std::vector<torch::Tensor>> PackActivation(const Activation& act);
Result<std::vector<torch::Tensor>> ShapesFromHeader(const torch::Tensor& header);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_STAGE_RUNNER_H_
