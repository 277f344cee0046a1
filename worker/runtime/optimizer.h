// NamedOptimizer: SGD (with momentum, torch.optim.SGD semantics) or Adam
// (torch.optim.Adam semantics) whose state is keyed by parameter name, so a
// checkpoint stores it as "<layer>.<param>#<slot>" and any layout can load
// the state of the parameters it owns.
//
// Thread safety: not thread-safe.
#ifndef TESSERA_WORKER_RUNTIME_OPTIMIZER_H_
#define TESSERA_WORKER_RUNTIME_OPTIMIZER_H_

#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tessera::worker {

struct OptimizerConfig {
  std::string kind = "sgd";  // "sgd" | "adam"
  double momentum = 0.9;     // sgd
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam
};

class NamedOptimizer {
 public:
  // kInvalidArgument for an unknown kind.
  static Result<NamedOptimizer> Make(const OptimizerConfig& config,
                                     std::vector<std::pair<std::string, torch::Tensor>> params);

  // One update with learning rate `lr` from the parameters' .grad.
  void Step(double lr);
  void ZeroGrad();

  // "<param>#momentum" (sgd), "<param>#exp_avg", "#exp_avg_sq", "#step" (adam).
  std::vector<std::pair<std::string, torch::Tensor>> StateTensors() const;
  // Replaces state from tensors named as above; names of unknown params are
  // ignored, missing ones leave the state empty.
  void LoadState(const std::map<std::string, torch::Tensor>& tensors);

 private:
  OptimizerConfig config_;
  std::vector<std::pair<std::string, torch::Tensor>> params_;
  std::map<std::string, torch::Tensor> state_;  // "<param>#<slot>"
};

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_OPTIMIZER_H_
