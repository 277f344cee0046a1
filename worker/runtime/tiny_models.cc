#include "worker/runtime/tiny_models.h"

namespace tessera::worker {
namespace {

class DenseLayer : public Layer {
 public:
  DenseLayer(int64_t in, int64_t out, bool activation, bool push_carry)
      : fc_(register_module("fc", torch::nn::Linear(in, out))),
        activation_(activation),
        push_carry_(push_carry) {}
  Activation Forward(Activation in) override {
    in.main = fc_->forward(in.main);
    if (activation_) in.main = torch::tanh(in.main);
    if (push_carry_) in.carry.push_back(in.main);
    return in;
  }
  double ForwardFlopsPerSample(const std::vector<int64_t>& in_shape) const override {
    return 2.0 * static_cast<double>(fc_->options.in_features() * fc_->options.out_features());
  }

 private:
  torch::nn::Linear fc_;
  bool activation_;
  bool push_carry_;
};

// Adds the newest carry tensor to the main tensor (a skip connection).
class MergeLayer : public Layer {
 public:
  Activation Forward(Activation in) override {
    in.main = in.main + in.carry.back();
    in.carry.pop_back();
    return in;
  }
};

class TinyModel : public LayeredModel {
 public:
  using LayeredModel::LayeredModel;
  torch::Tensor Loss(const Activation& out, const torch::Tensor& target) const override {
    return torch::mse_loss(out.main, target);
  }
};

}  // namespace

bool IsTinyModelName(const std::string& name) { return name == "tiny-mlp" || name == "tiny-skip"; }

Result<std::shared_ptr<LayeredModel>> MakeTinyModel(const std::string& name,
                                                    const ModelConfig& config) {
  if (!IsTinyModelName(name))
    return InvalidArgument("unknown tiny model \"" + name + "\"", "model");
  if (config.width < 1) return InvalidArgument("must be positive", "width");
  torch::manual_seed(config.seed);
  const int64_t h = config.width;
  std::vector<NamedLayer> layers;
  const bool skip = name == "tiny-skip";
  layers.push_back({"in", std::make_shared<DenseLayer>(kTinyInputFeatures, h, true, skip)});
  layers.push_back({"mid1", std::make_shared<DenseLayer>(h, h, true, false)});
  layers.push_back({"mid2", std::make_shared<DenseLayer>(h, h, true, false)});
  if (skip) layers.push_back({"merge", std::make_shared<MergeLayer>()});
  layers.push_back({"mid3", std::make_shared<DenseLayer>(h, h, true, false)});
  layers.push_back({"head", std::make_shared<DenseLayer>(h, kTinyOutputs, false, false)});
  return std::shared_ptr<LayeredModel>(
      std::make_shared<TinyModel>(name, TaskKind::kImageToImage, std::move(layers)));
}

}  // namespace tessera::worker
