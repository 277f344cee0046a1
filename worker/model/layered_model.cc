// MakeModel: the registry of reference models.
#include "worker/model/layered_model.h"

#include <exception>

#include "worker/model/classifier_resnet.h"
#include "worker/model/denoiser_dncnn.h"
#include "worker/model/reference_model.h"
#include "worker/model/unet.h"

namespace tessera::worker {

Result<std::shared_ptr<LayeredModel>> MakeModel(const std::string& name,
                                                const ModelConfig& config) {
  TESSERA_RETURN_IF_ERROR(ValidateModelConfig(config));
  try {
    torch::manual_seed(config.seed);
    if (name == "colorize-unet") return BuildColorizeUnet(config);
    if (name == "denoiser-dncnn") return BuildDenoiserDncnn(config);
    if (name == "classifier-resnet") return BuildClassifierResnet(config);
  } catch (const std::exception& e) {
    return Internal("building model " + name + ": " + e.what());
  }
  if (name == "gan-pix2pix") {
    return InvalidArgument("gan-pix2pix has two models; build it with MakeGan", "model");
  }
  return InvalidArgument(
      "unknown model '" + name + "' (known: colorize-unet, denoiser-dncnn, classifier-resnet)",
      "model");
}

}  // namespace tessera::worker
