// "denoiser-dncnn": DnCNN-style residual denoiser [N,C,H,W] -> [N,C,H,W].
// The network predicts the noise; the output is input - noise. The input
// rides in Activation.carry from the first layer to the last.
//
// Layers: "in" (pushes the input; conv C->w, ReLU), "mid1".."mid{n}"
// (conv w->w, batch norm, ReLU), "out" (conv w->C, pops the input, subtracts).
#ifndef TESSERA_WORKER_MODEL_DENOISER_DNCNN_H_
#define TESSERA_WORKER_MODEL_DENOISER_DNCNN_H_

#include <cstdint>
#include <memory>

#include "worker/model/layered_model.h"

namespace tessera::worker {

struct DncnnOptions {
  int64_t channels = 3;       // image channels (3: RGB, 1: grayscale)
  int64_t middle_layers = 8;  // DnCNN uses 15; small by default for CPU
};

// Loss: MSE against the clean image.
// REQUIRES: config validated; call under torch::manual_seed (MakeModel does).
std::shared_ptr<LayeredModel> BuildDenoiserDncnn(const ModelConfig& config,
                                                 const DncnnOptions& options = {});

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_MODEL_DENOISER_DNCNN_H_
