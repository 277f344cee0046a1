// Tiny LayeredModels the runtime's tests and benchmarks train: small enough
// for many multi-process runs on two CPU cores, deterministic (no dropout,
// no batch norm), and seeded from ModelConfig::seed.
//
//   "tiny-mlp"   [N, F] -> 4 tanh Linear layers -> head [N, 4]; F = 8.
//   "tiny-skip"  like tiny-mlp but layer "in" pushes its output on the
//                Activation's carry and layer "merge" adds it back, so a
//                pipeline cut between them must ship the carry.
// Hidden width = ModelConfig::width. Loss: mean squared error.
// Targets come from MakeSyntheticSource (data_source.h).
#ifndef TESSERA_WORKER_RUNTIME_TINY_MODELS_H_
#define TESSERA_WORKER_RUNTIME_TINY_MODELS_H_

#include <memory>
#include <string>

#include "common/status.h"
#include "worker/model/layered_model.h"

namespace tessera::worker {

constexpr int64_t kTinyInputFeatures = 8;
constexpr int64_t kTinyOutputs = 4;

bool IsTinyModelName(const std::string& name);
// kInvalidArgument for an unknown name or width < 1.
Result<std::shared_ptr<LayeredModel>> MakeTinyModel(const std::string& name,
                                                    const ModelConfig& config);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_TINY_MODELS_H_
