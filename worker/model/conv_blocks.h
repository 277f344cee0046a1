// Building blocks shared by the reference models: convolution + batch norm +
// activation, and FLOP estimates for the profile command.
//
// Thread safety: like torch::nn::Module, not thread-safe.
#ifndef TESSERA_WORKER_MODEL_CONV_BLOCKS_H_
#define TESSERA_WORKER_MODEL_CONV_BLOCKS_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "worker/model/batch_norm.h"
#include "worker/model/layered_model.h"

namespace tessera::worker {

enum class Act { kNone, kRelu, kLeakyRelu, kTanh };

torch::Tensor ApplyAct(const torch::Tensor& x, Act act);

// Forward FLOPs (multiply-add = 2) of a k x k convolution producing
// cout x hout x wout from cin channels.
double ConvFlops(int64_t cin, int64_t cout, int64_t k, int64_t hout, int64_t wout);

// Output size of a convolution along one axis.
int64_t ConvOut(int64_t in, int64_t k, int64_t stride, int64_t pad);

struct ConvSpec {
  int64_t in = 1;
  int64_t out = 1;
  int64_t kernel = 3;
  int64_t stride = 1;
  int64_t padding = 1;
  bool batch_norm = true;  // when false the convolution has a bias
  Act act = Act::kRelu;
};

// conv -> [SyncBatchNorm] -> activation. Submodules "conv" and "bn".
class ConvBnAct : public torch::nn::Module {
 public:
  explicit ConvBnAct(const ConvSpec& spec);
  torch::Tensor Forward(const torch::Tensor& x, BatchNormSync* sync);
  // FLOPs per sample for an input of spatial size h x w; sets h, w to the output size.
  double Flops(int64_t& h, int64_t& w) const;
  const ConvSpec& spec() const { return spec_; }

 private:
  ConvSpec spec_;
  torch::nn::Conv2d conv_{nullptr};
  std::shared_ptr<SyncBatchNorm> bn_;
};

// Two ConvBnAct 3x3 (the U-Net "double conv"). Submodules "conv1", "conv2".
class DoubleConv : public torch::nn::Module {
 public:
  DoubleConv(int64_t in, int64_t out, Act act = Act::kRelu);
  torch::Tensor Forward(const torch::Tensor& x, BatchNormSync* sync);
  double Flops(int64_t h, int64_t w) const;

 private:
  std::shared_ptr<ConvBnAct> conv1_;
  std::shared_ptr<ConvBnAct> conv2_;
};

// A layer that is one ConvBnAct: the classifier's stem, DnCNN's input and
// middle layers, the PatchGAN's convolutions. With keep_input, the layer's
// input is pushed to Activation.carry first (DnCNN subtracts it at the end).
class ConvLayer : public Layer {
 public:
  explicit ConvLayer(const ConvSpec& spec, bool keep_input = false);
  Activation Forward(Activation a) override;
  double ForwardFlopsPerSample(const std::vector<int64_t>& in_shape) const override;

 private:
  std::shared_ptr<ConvBnAct> conv_;
  bool keep_input_;
};

// Spatial dims (H, W) of a [C, H, W] shape; {1, 1} for shorter shapes.
std::pair<int64_t, int64_t> SpatialDims(const std::vector<int64_t>& in_shape);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_MODEL_CONV_BLOCKS_H_
