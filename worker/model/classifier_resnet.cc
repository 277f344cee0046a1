#include "worker/model/classifier_resnet.h"

#include <string>
#include <utility>
#include <vector>

#include "worker/model/conv_blocks.h"
#include "worker/model/reference_model.h"

namespace tessera::worker {
namespace {

// conv-bn-relu, conv-bn, + shortcut (1x1 conv-bn when the shape changes), relu.
class BasicBlockLayer : public Layer {
 public:
  BasicBlockLayer(int64_t in, int64_t out, int64_t stride) {
    conv1_ = register_module(
        "conv1", std::make_shared<ConvBnAct>(ConvSpec{.in = in, .out = out, .stride = stride}));
    conv2_ = register_module(
        "conv2", std::make_shared<ConvBnAct>(ConvSpec{.in = out, .out = out, .act = Act::kNone}));
    if (in != out || stride != 1) {
      shortcut_ =
          register_module("shortcut", std::make_shared<ConvBnAct>(ConvSpec{.in = in,
                                                                           .out = out,
                                                                           .kernel = 1,
                                                                           .stride = stride,
                                                                           .padding = 0,
                                                                           .act = Act::kNone}));
    }
  }
  Activation Forward(Activation a) override {
    BatchNormSync* sync = bn_sync_.get();
    torch::Tensor y = conv2_->Forward(conv1_->Forward(a.main, sync), sync);
    torch::Tensor s = shortcut_ ? shortcut_->Forward(a.main, sync) : a.main;
    a.main = torch::relu(y + s);
    return a;
  }
  double ForwardFlopsPerSample(const std::vector<int64_t>& in_shape) const override {
    auto [h, w] = SpatialDims(in_shape);
    int64_t sh = h, sw = w;
    double f = conv1_->Flops(h, w);
    f += conv2_->Flops(h, w);
    if (shortcut_) f += shortcut_->Flops(sh, sw);
    return f + 2.0 * static_cast<double>(conv2_->spec().out * h * w);
  }

 private:
  std::shared_ptr<ConvBnAct> conv1_, conv2_, shortcut_;
};

class PoolLayer : public Layer {
 public:
  Activation Forward(Activation a) override {
    a.main = a.main.mean({2, 3});
    return a;
  }
  double ForwardFlopsPerSample(const std::vector<int64_t>& in_shape) const override {
    double n = 1;
    for (int64_t d : in_shape) n *= static_cast<double>(d);
    return n;
  }
};

class FcLayer : public Layer {
 public:
  FcLayer(int64_t in, int64_t out) : in_(in), out_(out) {
    fc_ = register_module("fc", torch::nn::Linear(in, out));
  }
  Activation Forward(Activation a) override {
    a.main = fc_->forward(a.main);
    return a;
  }
  double ForwardFlopsPerSample(const std::vector<int64_t>& in_shape) const override {
    return 2.0 * static_cast<double>(in_ * out_);
  }

 private:
  int64_t in_, out_;
  torch::nn::Linear fc_{nullptr};
};

}  // namespace

std::shared_ptr<LayeredModel> BuildClassifierResnet(const ModelConfig& config) {
  const int64_t w = config.width;
  std::vector<NamedLayer> layers;
  layers.push_back({"stem", std::make_shared<ConvLayer>(ConvSpec{.in = 3, .out = w})});
  layers.push_back({"block1", std::make_shared<BasicBlockLayer>(w, w, 1)});
  layers.push_back({"block2", std::make_shared<BasicBlockLayer>(w, 2 * w, 2)});
  layers.push_back({"block3", std::make_shared<BasicBlockLayer>(2 * w, 2 * w, 1)});
  layers.push_back({"block4", std::make_shared<BasicBlockLayer>(2 * w, 4 * w, 2)});
  layers.push_back({"block5", std::make_shared<BasicBlockLayer>(4 * w, 4 * w, 1)});
  layers.push_back({"pool", std::make_shared<PoolLayer>()});
  layers.push_back({"fc", std::make_shared<FcLayer>(4 * w, config.num_classes)});
  return std::make_shared<ReferenceModel>("classifier-resnet", TaskKind::kClassification,
                                          std::move(layers), LossKind::kCrossEntropy);
}

}  // namespace tessera::worker
