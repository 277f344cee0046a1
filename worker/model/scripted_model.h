// ScriptedModel: a lab's own TorchScript module trained as a LayeredModel, so
// the planner can cut it like a reference model (data, pipeline and hybrid
// layouts, uneven shares and stages) and checkpoints name its tensors.
//
// The layers are the module's top-level children in order (a scripted
// nn.Sequential), or, when the module has a single child that has children
// itself, that child's (a module holding its Sequential). The module's own
// forward must be those layers one after another (CheckSequential tells).
// Each layer takes and gives one tensor; its parameters and buffers are the
// module's own tensors (training updates the module), named
// "<layer>.<parameter path with '.' as '_'>" ("3.weight" -> layer "3", "weight";
// "body.2.bias" of a held Sequential -> layer "body.2", "bias"). Every
// parameter trains (requires_grad is set on each).
//
// Profiles (worker/model/profile.h) measure each layer's time; its FLOPs (what
// the planner times a GPU by) are estimated from the convolutions and linear
// maps inside it (Layer::ForwardFlopsPerSample).
//
// Loss (LayeredModel::Loss), chosen by the job: "mse" (mean squared error),
// "l1" (mean absolute error), or "cross_entropy" (logits [N, K] against int64
// labels [N]).
//
// Batch norm inside a scripted layer keeps per-replica statistics (as DDP
// without SyncBatchNorm): data-parallel replicas then differ from one
// process on the whole batch. The reference models synchronise theirs.
//
// Errors: kInvalidArgument naming "model-file" (not loadable, not a sequence
// of at least two layers) or "loss" (an unknown loss).
//
// Thread safety: as LayeredModel (not thread-safe).
#ifndef TESSERA_WORKER_MODEL_SCRIPTED_MODEL_H_
#define TESSERA_WORKER_MODEL_SCRIPTED_MODEL_H_

#include <torch/torch.h>

#include <memory>
#include <string>

#include "common/status.h"
#include "worker/model/layered_model.h"

namespace tessera::worker {

// `name` is the model's name in checkpoints and profiles (the file's stem).
Result<std::shared_ptr<LayeredModel>> LoadScriptedModel(const std::string& path,
                                                        const std::string& name,
                                                        const std::string& loss);

// kInvalidArgument naming "model-file" unless `want`, the module's own output
// for `input` (eval mode, no grad; the caller ran it), equals `model`'s layers
// run in order on `input`. `path` names the module in the message. Leaves the
// model in training mode.
Status CheckSequential(const std::string& path, LayeredModel& model, const torch::Tensor& input,
                       const torch::Tensor& want);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_MODEL_SCRIPTED_MODEL_H_
