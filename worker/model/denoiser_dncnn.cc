#include "worker/model/denoiser_dncnn.h"

#include <string>
#include <utility>
#include <vector>

#include "worker/model/conv_blocks.h"
#include "worker/model/reference_model.h"

namespace tessera::worker {
namespace {

class DncnnOutLayer : public Layer {
 public:
  DncnnOutLayer(int64_t width, int64_t channels) {
    conv_ = register_module(
        "conv", std::make_shared<ConvBnAct>(ConvSpec{
                    .in = width, .out = channels, .batch_norm = false, .act = Act::kNone}));
  }
  Activation Forward(Activation a) override {
    TORCH_CHECK(!a.carry.empty(), "out: expected the noisy input in Activation.carry");
    torch::Tensor noisy = std::move(a.carry.back());
    a.carry.pop_back();
    a.main = noisy - conv_->Forward(a.main, bn_sync_.get());
    return a;
  }
  double ForwardFlopsPerSample(const std::vector<int64_t>& in_shape) const override {
    auto [h, w] = SpatialDims(in_shape);
    const double out_elems = static_cast<double>(conv_->spec().out * h * w);
    return conv_->Flops(h, w) + out_elems;
  }

 private:
  std::shared_ptr<ConvBnAct> conv_;
};

}  // namespace

std::shared_ptr<LayeredModel> BuildDenoiserDncnn(const ModelConfig& config,
                                                 const DncnnOptions& options) {
  std::vector<NamedLayer> layers;
  layers.push_back(
      {"in", std::make_shared<ConvLayer>(
                 ConvSpec{.in = options.channels, .out = config.width, .batch_norm = false},
                 /*keep_input=*/true)});
  for (int64_t i = 1; i <= options.middle_layers; ++i) {
    layers.push_back({"mid" + std::to_string(i), std::make_shared<ConvLayer>(ConvSpec{
                                                     .in = config.width, .out = config.width})});
  }
  layers.push_back({"out", std::make_shared<DncnnOutLayer>(config.width, options.channels)});
  return std::make_shared<ReferenceModel>("denoiser-dncnn", TaskKind::kImageToImage,
                                          std::move(layers), LossKind::kMse);
}

}  // namespace tessera::worker
