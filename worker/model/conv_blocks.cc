#include "worker/model/conv_blocks.h"

#include <utility>

namespace tessera::worker {

torch::Tensor ApplyAct(const torch::Tensor& x, Act act) {
  switch (act) {
    case Act::kNone:
      return x;
    case Act::kRelu:
      return torch::relu(x);
    case Act::kLeakyRelu:
      return torch::leaky_relu(x, 0.2);
    case Act::kTanh:
      return torch::tanh(x);
  }
  return x;
}

double ConvFlops(int64_t cin, int64_t cout, int64_t k, int64_t hout, int64_t wout) {
  return 2.0 * static_cast<double>(cin) * static_cast<double>(cout) * static_cast<double>(k * k) *
         static_cast<double>(hout) * static_cast<double>(wout);
}

int64_t ConvOut(int64_t in, int64_t k, int64_t stride, int64_t pad) {
  return (in + 2 * pad - k) / stride + 1;
}

std::pair<int64_t, int64_t> SpatialDims(const std::vector<int64_t>& in_shape) {
  if (in_shape.size() < 3) return {1, 1};
  return {in_shape[in_shape.size() - 2], in_shape[in_shape.size() - 1]};
}

ConvBnAct::ConvBnAct(const ConvSpec& spec) : spec_(spec) {
  conv_ = register_module("conv",
                          torch::nn::Conv2d(torch::nn::Conv2dOptions(spec.in, spec.out, spec.kernel)
                                                .stride(spec.stride)
                                                .padding(spec.padding)
                                                .bias(!spec.batch_norm)));
  if (spec.batch_norm) bn_ = register_module("bn", std::make_shared<SyncBatchNorm>(spec.out));
}

torch::Tensor ConvBnAct::Forward(const torch::Tensor& x, BatchNormSync* sync) {
  torch::Tensor y = conv_->forward(x);
  if (bn_) y = bn_->Forward(y, sync);
  return ApplyAct(y, spec_.act);
}

double ConvBnAct::Flops(int64_t& h, int64_t& w) const {
  h = ConvOut(h, spec_.kernel, spec_.stride, spec_.padding);
  w = ConvOut(w, spec_.kernel, spec_.stride, spec_.padding);
  double flops = ConvFlops(spec_.in, spec_.out, spec_.kernel, h, w);
  // Batch norm and activation: a few operations per output element.
  flops += (spec_.batch_norm ? 4.0 : 0.0) * static_cast<double>(spec_.out * h * w);
  return flops;
}

DoubleConv::DoubleConv(int64_t in, int64_t out, Act act) {
  conv1_ = register_module("conv1",
                           std::make_shared<ConvBnAct>(ConvSpec{.in = in, .out = out, .act = act}));
  conv2_ = register_module(
      "conv2", std::make_shared<ConvBnAct>(ConvSpec{.in = out, .out = out, .act = act}));
}

torch::Tensor DoubleConv::Forward(const torch::Tensor& x, BatchNormSync* sync) {
  return conv2_->Forward(conv1_->Forward(x, sync), sync);
}

double DoubleConv::Flops(int64_t h, int64_t w) const {
  double f = conv1_->Flops(h, w);
  return f + conv2_->Flops(h, w);
}

ConvLayer::ConvLayer(const ConvSpec& spec, bool keep_input) : keep_input_(keep_input) {
  conv_ = register_module("conv", std::make_shared<ConvBnAct>(spec));
}

Activation ConvLayer::Forward(Activation a) {
  if (keep_input_) a.carry.push_back(a.main);
  a.main = conv_->Forward(a.main, bn_sync_.get());
  return a;
}

double ConvLayer::ForwardFlopsPerSample(const std::vector<int64_t>& in_shape) const {
  auto [h, w] = SpatialDims(in_shape);
  return conv_->Flops(h, w);
}

}  // namespace tessera::worker
