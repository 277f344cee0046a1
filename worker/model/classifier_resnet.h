// "classifier-resnet": a small ResNet-style classifier, RGB [N,3,H,W] ->
// logits [N, num_classes]; cross-entropy against class indices [N] (int64).
//
// Layers: "stem" (conv 3->w, BN, ReLU), "block1".."block5" (basic residual
// blocks, one layer each: w, 2w stride 2, 2w, 4w stride 2, 4w), "pool"
// (global average -> [N, 4w]), "fc" (linear -> num_classes).
#ifndef TESSERA_WORKER_MODEL_CLASSIFIER_RESNET_H_
#define TESSERA_WORKER_MODEL_CLASSIFIER_RESNET_H_

#include <memory>

#include "worker/model/layered_model.h"

namespace tessera::worker {

// REQUIRES: config validated; call under torch::manual_seed (MakeModel does).
std::shared_ptr<LayeredModel> BuildClassifierResnet(const ModelConfig& config);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_MODEL_CLASSIFIER_RESNET_H_
