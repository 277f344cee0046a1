#include "worker/model/unet.h"

#include <utility>

#include "worker/model/conv_blocks.h"

namespace tessera::worker {
namespace {

torch::Tensor PopCarry(Activation& a, const char* layer) {
  TORCH_CHECK(!a.carry.empty(), layer, ": expected a skip connection in Activation.carry");
  torch::Tensor t = std::move(a.carry.back());
  a.carry.pop_back();
  return t;
}

class UnetInLayer : public Layer {
 public:
  UnetInLayer(int64_t in, int64_t out) {
    block_ = register_module("block", std::make_shared<DoubleConv>(in, out));
  }
  Activation Forward(Activation a) override {
    a.main = block_->Forward(a.main, bn_sync_.get());
    a.carry.push_back(a.main);
    return a;
  }
  double ForwardFlopsPerSample(const std::vector<int64_t>& in_shape) const override {
    auto [h, w] = SpatialDims(in_shape);
    return block_->Flops(h, w);
  }

 private:
  std::shared_ptr<DoubleConv> block_;
};

class UnetDownLayer : public Layer {
 public:
  UnetDownLayer(int64_t in, int64_t out, bool push) : push_(push) {
    block_ = register_module("block", std::make_shared<DoubleConv>(in, out));
  }
  Activation Forward(Activation a) override {
    a.main = block_->Forward(torch::max_pool2d(a.main, 2), bn_sync_.get());
    if (push_) a.carry.push_back(a.main);
    return a;
  }
  double ForwardFlopsPerSample(const std::vector<int64_t>& in_shape) const override {
    auto [h, w] = SpatialDims(in_shape);
    const int64_t c = in_shape.empty() ? 1 : in_shape[0];
    return static_cast<double>(c * h * w) + block_->Flops(h / 2, w / 2);
  }

 private:
  bool push_;
  std::shared_ptr<DoubleConv> block_;
};

class UnetUpLayer : public Layer {
 public:
  UnetUpLayer(int64_t in, int64_t out, std::string name)
      : in_(in), out_(out), name_(std::move(name)) {
    up_ = register_module(
        "up", torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(in, out, 2).stride(2)));
    block_ = register_module("block", std::make_shared<DoubleConv>(2 * out, out));
  }
  Activation Forward(Activation a) override {
    torch::Tensor skip = PopCarry(a, name_.c_str());
    a.main = block_->Forward(torch::cat({skip, up_->forward(a.main)}, 1), bn_sync_.get());
    return a;
  }
  double ForwardFlopsPerSample(const std::vector<int64_t>& in_shape) const override {
    auto [h, w] = SpatialDims(in_shape);
    return ConvFlops(in_, out_, 2, h, w) + block_->Flops(2 * h, 2 * w);
  }

 private:
  int64_t in_, out_;
  std::string name_;
  torch::nn::ConvTranspose2d up_{nullptr};
  std::shared_ptr<DoubleConv> block_;
};

class UnetHeadLayer : public Layer {
 public:
  UnetHeadLayer(int64_t in, int64_t out) : in_(in), out_(out) {
    conv_ = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1)));
  }
  Activation Forward(Activation a) override {
    a.main = torch::tanh(conv_->forward(a.main));
    return a;
  }
  double ForwardFlopsPerSample(const std::vector<int64_t>& in_shape) const override {
    auto [h, w] = SpatialDims(in_shape);
    return ConvFlops(in_, out_, 1, h, w);
  }

 private:
  int64_t in_, out_;
  torch::nn::Conv2d conv_{nullptr};
};

}  // namespace

std::vector<NamedLayer> BuildUnetLayers(const UnetOptions& o) {
  std::vector<NamedLayer> layers;
  const std::string& p = o.prefix;
  layers.push_back({p + "enc0", std::make_shared<UnetInLayer>(o.in_channels, o.width)});
  int64_t c = o.width;
  for (int64_t i = 1; i <= o.depth; ++i) {
    layers.push_back({p + "down" + std::to_string(i),
                      std::make_shared<UnetDownLayer>(c, 2 * c, /*push=*/i < o.depth)});
    c *= 2;
  }
  for (int64_t i = o.depth; i >= 1; --i) {
    const std::string name = p + "up" + std::to_string(i);
    layers.push_back({name, std::make_shared<UnetUpLayer>(c, c / 2, name)});
    c /= 2;
  }
  layers.push_back({p + "head", std::make_shared<UnetHeadLayer>(c, o.out_channels)});
  return layers;
}

std::shared_ptr<LayeredModel> BuildColorizeUnet(const ModelConfig& config, LossKind loss) {
  UnetOptions o{.in_channels = 1, .out_channels = 2, .width = config.width, .depth = 3};
  return std::make_shared<ReferenceModel>("colorize-unet", TaskKind::kImageToImage,
                                          BuildUnetLayers(o), loss);
}

}  // namespace tessera::worker
