// LossScaler: dynamic loss scaling (as torch.cuda.amp.GradScaler) for
// mixed-precision training: start at 2^16, halve and skip the step when any
// rank sees a non-finite gradient, double after 2000 good steps.
//
// The finiteness check costs one device-to-host sync per step, not one per
// parameter: the unscale and the check are one multi-tensor kernel over every
// gradient (torch.amp.GradScaler's), the flag stays on the device, and only it
// is read back (after the all-reduce that every rank needs anyway).
//
// Thread safety: not thread-safe; one per rank.
#ifndef TESSERA_WORKER_RUNTIME_LOSS_SCALER_H_
#define TESSERA_WORKER_RUNTIME_LOSS_SCALER_H_

#include <torch/torch.h>

#include "common/status.h"
#include "worker/runtime/checkpoint.h"
#include "worker/runtime/collectives.h"

namespace tessera::worker {

// Multiplies every defined gradient of `params` by `factor` in place and returns a
// one-element tensor on the gradients' device: 1 when some gradient has a NaN or an
// infinity, else 0 (float64; an undefined tensor when no gradient is defined). No
// host sync.
torch::Tensor UnscaleAndFlagNonFinite(const NamedTensors& params, double factor);

class LossScaler {
 public:
  double scale() const { return scale_; }
  // Unscales the gradients in place; false if a step must be skipped (a non-finite
  // gradient on any rank of `world`).
  Result<bool> UnscaleAndCheck(const NamedTensors& params, Collectives& world,
                               torch::Device comm_device);

 private:
  double scale_ = 65536.0;
  int64_t good_steps_ = 0;
};

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_LOSS_SCALER_H_
