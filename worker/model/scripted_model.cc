#include "worker/model/scripted_model.h"

#include <torch/script.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace tessera::worker {
namespace {

constexpr char kField[] = "model-file";

std::string Flat(std::string name) {
  std::replace(name.begin(), name.end(), '.', '_');
  return name;
}

// One child of the module: its forward on the main tensor; its tensors
// registered as this layer's own (the same tensors, not copies).
class ScriptedLayer : public Layer {
 public:
  explicit ScriptedLayer(torch::jit::Module m) : module_(std::move(m)) {
    for (const auto& p : module_.named_parameters(/*recurse=*/true)) {
      register_parameter(Flat(p.name), p.value, /*requires_grad=*/true);  // every parameter trains
    }
    for (const auto& b : module_.named_buffers(/*recurse=*/true)) {
      register_buffer(Flat(b.name), b.value);
    }
  }
  Activation Forward(Activation in) override {
    in.main = module_.forward({in.main}).toTensor();
    return in;
  }
  void train(bool on) override {
    Layer::train(on);
    module_.train(on);
  }
  // The multiply-adds of the child's convolutions and linear maps, which hold
  // nearly all of an image model's arithmetic (the planner's GPU times come
  // from FLOPs; its emulated and CPU times from the measured milliseconds).
  // Sizes are the child's own input and output, from one sample's forward in
  // eval mode (batch norm statistics untouched): a convolution is counted at
  // the child's output size, a transposed one at its input size, so a child
  // that changes resolution inside is an estimate.
  double ForwardFlopsPerSample(const std::vector<int64_t>& in_shape) const override {
    try {
      torch::jit::Module m = module_;  // a handle: forward is not const
      const bool was_training = m.is_training();
      m.eval();
      std::vector<int64_t> shape = {1};
      shape.insert(shape.end(), in_shape.begin(), in_shape.end());
      torch::Tensor out;
      {
        torch::NoGradGuard no_grad;
        out = m.forward({torch::zeros(shape)}).toTensor();
      }
      m.train(was_training);
      const double in_px = Pixels(shape), out_px = Pixels(out.sizes().vec());
      // Positions a linear map runs at: every element but the last dimension's.
      const double rows = out.dim() >= 1 && out.size(-1) > 0
                              ? static_cast<double>(out.numel()) / static_cast<double>(out.size(-1))
                              : 1.0;
      double flops = 0;
      for (const auto& sub : m.modules()) {
        const std::string kind = KindOf(sub);
        if (!sub.hasattr("weight") || !sub.attr("weight").isTensor()) continue;
        const auto weights = static_cast<double>(sub.attr("weight").toTensor().numel());
        if (kind.starts_with("ConvTranspose")) {
          flops += 2 * weights * in_px;
        } else if (kind.starts_with("Conv")) {
          flops += 2 * weights * out_px;
        } else if (kind == "Linear" || kind == "LazyLinear") {
          flops += 2 * weights * rows;
        }
      }
      return flops;
    } catch (const std::exception&) {
      return 0.0;  // unknown: the planner's floor applies
    }
  }

 private:
  // Spatial positions of an [N, C, ...] shape (1 without spatial dimensions).
  static double Pixels(const std::vector<int64_t>& shape) {
    double px = 1;
    for (size_t i = 2; i < shape.size(); ++i) px *= static_cast<double>(shape[i]);
    return px;
  }
  // "Conv2d" of "__torch__.torch.nn.modules.conv.___torch_mangle_3.Conv2d".
  static std::string KindOf(const torch::jit::Module& m) {
    const std::string q = m.type()->name() ? m.type()->name()->qualifiedName() : std::string();
    return q.substr(q.rfind('.') + 1);
  }

  torch::jit::Module module_;
};

class ScriptedModel : public LayeredModel {
 public:
  ScriptedModel(std::string name, TaskKind task, std::vector<NamedLayer> layers, std::string loss)
      : LayeredModel(std::move(name), task, std::move(layers)), loss_(std::move(loss)) {}
  torch::Tensor Loss(const Activation& out, const torch::Tensor& target) const override {
    if (loss_ == "cross_entropy") return torch::nn::functional::cross_entropy(out.main, target);
    if (loss_ == "l1") return (out.main - target).abs().mean();
    return (out.main - target).pow(2).mean();
  }

 private:
  std::string loss_;
};

std::vector<std::pair<std::string, torch::jit::Module>> Children(const torch::jit::Module& m) {
  std::vector<std::pair<std::string, torch::jit::Module>> out;
  for (const auto& c : m.named_children()) out.emplace_back(c.name, c.value);
  return out;
}

}  // namespace

Result<std::shared_ptr<LayeredModel>> LoadScriptedModel(const std::string& path,
                                                        const std::string& name,
                                                        const std::string& loss) {
  if (loss != "mse" && loss != "l1" && loss != "cross_entropy") {
    return InvalidArgument("must be mse, l1 or cross_entropy", "loss");
  }
  torch::jit::Module module;
  try {
    module = torch::jit::load(path);
  } catch (const std::exception& e) {
    std::string what = e.what();
    return InvalidArgument(
        path + " is not a loadable TorchScript module: " + what.substr(0, what.find('\n')), kField);
  }
  auto children = Children(module);
  std::string prefix;
  if (children.size() == 1 && Children(children[0].second).size() >= 2) {
    prefix = children[0].first + ".";
    children = Children(children[0].second);
  }
  if (children.size() < 2) {
    return InvalidArgument(
        path +
            " is not a sequence of layers: its top-level children (a scripted nn.Sequential, "
            "or a module holding one) are what Tessera cuts into stages, and it has " +
            std::to_string(children.size()),
        kField);
  }
  std::vector<NamedLayer> layers;
  for (auto& [child_name, child] : children) {
    layers.push_back({prefix + child_name, std::make_shared<ScriptedLayer>(child)});
  }
  const TaskKind task =
      loss == "cross_entropy" ? TaskKind::kClassification : TaskKind::kImageToImage;
  return std::shared_ptr<LayeredModel>(
      std::make_shared<ScriptedModel>(name, task, std::move(layers), loss));
}

Status CheckSequential(const std::string& path, LayeredModel& model, const torch::Tensor& input,
                       const torch::Tensor& want) {
  try {
    model.SetTraining(false);
    torch::NoGradGuard no_grad;
    Activation a;
    a.main = input;
    const torch::Tensor got = model.Forward(std::move(a), 0, model.num_layers()).main;
    model.SetTraining(true);
    if (got.sizes() != want.sizes() || !torch::allclose(got, want, 1e-4, 1e-5)) {
      return InvalidArgument(path +
                                 "'s forward is not its layers one after another (the "
                                 "output of the layers in order differs from the module's)",
                             kField);
    }
    return Status::Ok();
  } catch (const std::exception& e) {
    model.SetTraining(true);
    std::string what = e.what();
    return InvalidArgument(
        path + ": running its layers in order failed: " + what.substr(0, what.find('\n')), kField);
  }
}

}  // namespace tessera::worker
