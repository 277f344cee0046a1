// U-Net as a list of layers, used by "colorize-unet" and the pix2pix
// generator. Skip connections ride in Activation.carry: "enc0" and
// "down1".."down{depth-1}" push their output, "up{depth}".."up1" pop it, so
// a cut between any two layers is valid.
//
// Layers (prefix + name), depth d:
//   enc0         DoubleConv(in -> w), pushes
//   down1..down d  maxpool 2, DoubleConv(c -> 2c); all but down d push
//   up d..up1    ConvTranspose 2x2 stride 2 (2c -> c), pop skip, concat,
//                DoubleConv(2c -> c)
//   head         1x1 conv (w -> out), tanh
// REQUIRES: H and W divisible by 2^depth.
#ifndef TESSERA_WORKER_MODEL_UNET_H_
#define TESSERA_WORKER_MODEL_UNET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/model/layered_model.h"
#include "worker/model/reference_model.h"

namespace tessera::worker {

struct UnetOptions {
  int64_t in_channels = 1;
  int64_t out_channels = 2;
  int64_t width = 16;
  int64_t depth = 3;
  std::string prefix;  // prepended to every layer name, e.g. "g_"
};

std::vector<NamedLayer> BuildUnetLayers(const UnetOptions& options);

// "colorize-unet": L [N,1,H,W] (normalised, see worker/data/color.h) ->
// ab [N,2,H,W] in [-1, 1] (tanh). Loss L1 (default) or MSE on ab.
// REQUIRES: config validated (width > 0, image_size % 8 == 0); call under
// torch::manual_seed for deterministic initialisation (MakeModel does).
std::shared_ptr<LayeredModel> BuildColorizeUnet(const ModelConfig& config,
                                                LossKind loss = LossKind::kL1);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_MODEL_UNET_H_
