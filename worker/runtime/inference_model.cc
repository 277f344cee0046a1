#include "worker/runtime/inference_model.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

#include "worker/data/color.h"
#include "worker/data/image_folder_dataset.h"
#include "worker/data/sample_images.h"
#include "worker/model/gan.h"
#include "worker/runtime/checkpoint.h"
#include "worker/runtime/device_memory.h"
#include "worker/runtime/emulated_memory.h"
#include "worker/runtime/image_model_probe.h"
#include "worker/runtime/rank_device.h"

namespace tessera::worker {
namespace fs = std::filesystem;
namespace {

using nlohmann::json;

constexpr char kColorize[] = "colorize-unet";
constexpr char kDenoiser[] = "denoiser-dncnn";
constexpr char kClassifier[] = "classifier-resnet";
constexpr char kGan[] = "gan-pix2pix";

bool KnownModel(const std::string& name) {
  return name == kColorize || name == kDenoiser || name == kClassifier || name == kGan;
}

// The reference models' image conventions (the file comment of the header).
api::ImageConvention BuiltinConvention(const std::string& name) {
  api::ImageConvention c;
  c.range = std::make_pair(0.0, 1.0);
  c.align_px = 1;
  c.halo_px = 0;
  if (name == kColorize) {
    c.input = "l";
    c.output = "ab";
  } else if (name == kGan) {
    c.input = "gray";
    c.output = "rgb";
    c.range = std::make_pair(-1.0, 1.0);
  } else if (name == kClassifier) {
    c.input = "rgb";
    c.output = "scores";
  } else {
    c.input = "rgb";
    c.output = "rgb";
  }
  return c;
}

// [0, 1] -> [lo, hi] and back; the identity for [0, 1] itself.
torch::Tensor ToRange(const torch::Tensor& unit, const std::pair<double, double>& r) {
  if (r.first == 0.0 && r.second == 1.0) return unit;
  return unit * (r.second - r.first) + r.first;
}
torch::Tensor FromRange(const torch::Tensor& v, const std::pair<double, double>& r) {
  if (r.first == 0.0 && r.second == 1.0) return v;
  return (v - r.first) / (r.second - r.first);
}

torch::Tensor Luma(const torch::Tensor& rgb) {
  return (0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]).unsqueeze(0);
}

Result<std::shared_ptr<LayeredModel>> BuildNet(const std::string& name, const ModelConfig& mc) {
  if (name == kGan) {
    TESSERA_ASSIGN_OR_RETURN(Gan gan, MakeGan(name, mc));
    return gan.generator;
  }
  return MakeModel(name, mc);
}

}  // namespace

Result<std::unique_ptr<InferenceModel>> InferenceModel::FromNet(const std::string& model_name,
                                                                std::shared_ptr<LayeredModel> net) {
  if (!KnownModel(model_name)) {
    return InvalidArgument("unknown model \"" + model_name +
                               "\" (known: colorize-unet, denoiser-dncnn, classifier-resnet, "
                               "gan-pix2pix)",
                           "model");
  }
  if (net == nullptr) return InvalidArgument("no network", "model");
  std::unique_ptr<InferenceModel> m(new InferenceModel());
  m->name_ = model_name;
  m->net_ = std::move(net);
  m->spatial_ = model_name != kClassifier;
  if (m->spatial_) {
    TESSERA_ASSIGN_OR_RETURN(m->geometry_, TileGeometryForModel(model_name));
  }
  m->convention_ = BuiltinConvention(model_name);
  m->convention_.align_px = m->geometry_.align_px;
  m->convention_.halo_px = m->geometry_.halo_px;
  m->input_channels_ = m->convention_.input == "rgb" ? 3 : 1;
  m->gray_source_stays_gray_ = model_name == kDenoiser;
  m->source_ = "a model built in memory";
  m->net_->SetTraining(false);
  return Result<std::unique_ptr<InferenceModel>>(std::move(m));
}

Result<std::unique_ptr<InferenceModel>> InferenceModel::Load(const std::string& model_name,
                                                             const std::string& checkpoint_dir,
                                                             int64_t width,
                                                             const std::string& device,
                                                             double device_speed) {
  if (!KnownModel(model_name)) {
    return InvalidArgument("unknown model \"" + model_name +
                               "\" (known: colorize-unet, denoiser-dncnn, classifier-resnet, "
                               "gan-pix2pix)",
                           "model");
  }
  if (checkpoint_dir.empty()) {
    return InvalidArgument("a checkpoint directory is required (--checkpoint)", "checkpoint");
  }
  std::error_code ec;
  if (!fs::is_directory(checkpoint_dir, ec)) {
    return InvalidArgument("checkpoint directory " + checkpoint_dir + " does not exist",
                           "checkpoint");
  }
  std::vector<std::string> skipped;
  std::optional<Manifest> manifest = FindNewestCheckpoint(checkpoint_dir, &skipped);
  if (!manifest) {
    std::string why;
    for (const std::string& s : skipped) why += (why.empty() ? " (" : "; ") + s;
    if (!why.empty()) why += ")";
    return InvalidArgument("no complete checkpoint in " + checkpoint_dir + why, "checkpoint");
  }
  if (manifest->model != model_name) {
    return InvalidArgument("checkpoint " + checkpoint_dir + "/" + StepDirName(manifest->step) +
                               " holds model \"" + manifest->model + "\", not \"" + model_name +
                               "\"",
                           "checkpoint");
  }
  torch::Device dev(torch::kCPU);
  try {
    dev = torch::Device(device);
  } catch (const std::exception& e) {
    return InvalidArgument("bad device \"" + device + "\"", "TESSERA_DEVICE");
  }
  ModelConfig mc;
  mc.num_classes =
      SamplePatternNames().empty() ? 1 : static_cast<int64_t>(SamplePatternNames().size());
  try {
    if (width > 0) {
      mc.width = width;
    } else {
      // The first parameter of layer 0 is [width, in, k, k] in every
      // reference model; the classifier's last matrix is [classes, features].
      TESSERA_ASSIGN_OR_RETURN(auto probe, BuildNet(model_name, mc));
      auto params = probe->NamedParameters(0, probe->num_layers());
      std::vector<std::string> names = {params.front().first};
      std::string classes_name;
      if (model_name == kClassifier) {
        for (const auto& [n, t] : params) {
          if (t.dim() == 2) classes_name = n;
        }
        if (!classes_name.empty()) names.push_back(classes_name);
      }
      auto loaded = LoadTensors(checkpoint_dir, *manifest, names);
      if (!loaded.ok()) {
        return InvalidArgument(
            "checkpoint does not fit " + model_name + ": " + loaded.status().message(),
            "checkpoint");
      }
      mc.width = loaded->at(names[0]).size(0);
      if (!classes_name.empty()) mc.num_classes = loaded->at(classes_name).size(0);
    }
    TESSERA_ASSIGN_OR_RETURN(auto net, BuildNet(model_name, mc));
    NamedTensors state = net->NamedParameters(0, net->num_layers());
    for (auto& b : net->NamedBuffers(0, net->num_layers())) state.push_back(b);
    std::vector<std::string> names;
    for (const auto& [n, t] : state) names.push_back(n);
    auto loaded = LoadTensors(checkpoint_dir, *manifest, names);
    if (!loaded.ok()) {
      return InvalidArgument(
          "checkpoint does not fit " + model_name + ": " + loaded.status().message(), "checkpoint");
    }
    torch::NoGradGuard no_grad;
    for (auto& [n, t] : state) {
      const torch::Tensor& src = loaded->at(n);
      if (src.sizes() != t.sizes()) {
        return InvalidArgument("checkpoint tensor " + n + " has another shape than the model" +
                                   (width > 0 ? " (wrong --width?)" : ""),
                               "checkpoint");
      }
      t.copy_(src);
    }
    if (dev.type() != torch::kCPU) {
      for (size_t i = 0; i < net->num_layers(); ++i) net->layer(i).layer->to(dev);
    }
    TESSERA_ASSIGN_OR_RETURN(auto model, FromNet(model_name, net));
    model->checkpoint_step_ = manifest->step;
    model->source_ = "checkpoint " + checkpoint_dir + "/" + StepDirName(manifest->step);
    model->device_ = dev;
    model->emulated_ = SegmentClockFor(dev, device_speed, torch::get_num_threads());
    return Result<std::unique_ptr<InferenceModel>>(std::move(model));
  } catch (const std::exception& e) {
    return Internal("loading " + model_name + " from " + checkpoint_dir + ": " + e.what());
  }
}

Result<std::unique_ptr<InferenceModel>> InferenceModel::LoadExported(
    const std::string& path, const api::ImageConvention& stated, const std::string& device,
    double device_speed) {
  TESSERA_RETURN_IF_ERROR(api::ValidateImageConvention(stated, "image"));
  torch::Device dev(torch::kCPU);
  try {
    dev = torch::Device(device);
  } catch (const std::exception& e) {
    return InvalidArgument("bad device \"" + device + "\"", "TESSERA_DEVICE");
  }
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<ExportedModule> module, ExportedModule::Load(path, dev));
  std::unique_ptr<InferenceModel> m(new InferenceModel());
  m->name_ = std::filesystem::path(path).stem().string();
  m->source_ = module->format() + " module " + path;
  const api::ImageConvention wanted = api::Overlay(stated, module->stated());
  m->exported_ = std::move(module);
  m->device_ = dev;
  m->emulated_ = SegmentClockFor(dev, device_speed, torch::get_num_threads());
  TESSERA_ASSIGN_OR_RETURN(
      ProbedImageModel probed,
      ProbeImageModel([&m](const torch::Tensor& bchw) { return m->ForwardBatch(bchw); }, wanted,
                      dev));
  m->convention_ = probed.convention;
  m->spatial_ = probed.spatial;
  m->input_channels_ = probed.input_channels;
  m->bytes_per_pixel_ = probed.bytes_per_pixel;
  m->halo_bounded_ = probed.halo_bounded;
  m->geometry_ = TileGeometry{probed.convention.halo_px, probed.convention.align_px};
  return Result<std::unique_ptr<InferenceModel>>(std::move(m));
}

Result<torch::Tensor> InferenceModel::Prepare(const Image& image) const {
  try {
    torch::Tensor t = ImageToTensor(image);
    if (t.size(0) == 1) t = t.expand({3, t.size(1), t.size(2)}).contiguous();
    const std::pair<double, double> range = *convention_.range;
    if (convention_.input == "l") {
      const int64_t h = t.size(1), w = t.size(2), n = h * w;
      torch::Tensor l = torch::empty({1, h, w});
      const float* p = t.data_ptr<float>();
      float* lp = l.data_ptr<float>();
      for (int64_t i = 0; i < n; ++i) {
        lp[i] = NormalizeL(RgbToLab(Rgb{p[i], p[n + i], p[2 * n + i]}).l);
      }
      return l;
    }
    if (convention_.input == "gray") {
      // Rec. 601 luma of the RGB image, as the GAN's training data.
      return ToRange(Luma(t), range).contiguous();
    }
    return ToRange(t, range).contiguous();
  } catch (const std::exception& e) {
    return Internal(std::string("preparing the model input: ") + e.what());
  }
}

Result<torch::Tensor> InferenceModel::RawForward(const torch::Tensor& bchw) {
  if (exported_) {
    TESSERA_ASSIGN_OR_RETURN(torch::Tensor out, exported_->Forward(bchw));
    return out;
  }
  Activation a;
  a.main = bchw;
  a = net_->Forward(std::move(a), 0, net_->num_layers());
  return a.main;
}

Result<torch::Tensor> InferenceModel::Forward(const torch::Tensor& chw) {
  TESSERA_ASSIGN_OR_RETURN(torch::Tensor out, ForwardBatch(chw.unsqueeze(0)));
  return out.squeeze(0);
}

Result<torch::Tensor> InferenceModel::ForwardBatch(const torch::Tensor& bchw) {
  try {
    c10::InferenceMode inference;
    // One compute segment of the (emulated) device, as training's (stage_runner.cc).
    const EmulatedDevice::Segment segment = emulated_.Begin();
    TESSERA_ASSIGN_OR_RETURN(torch::Tensor raw, RawForward(ToDevice(bchw, device_)));
    torch::Tensor out = raw.to(torch::kCPU, torch::kFloat).contiguous();
    emulated_.End(segment);
    return out;
  } catch (const std::exception& e) {
    return ComputeFailure(name_ + " forward", e);
  }
}

Status InferenceModel::WriteOutput(const std::string& path, const std::string& item,
                                   int64_t source_channels, const torch::Tensor& input,
                                   const torch::Tensor& output) const {
  try {
    if (convention_.output == "scores") {
      const torch::Tensor p = torch::softmax(output.to(torch::kDouble), 0).contiguous();
      std::vector<double> scores(p.data_ptr<double>(), p.data_ptr<double>() + p.numel());
      const int64_t best = p.argmax().item<int64_t>();
      json j = {{"item", item}, {"model", name_}, {"class", best}, {"scores", scores}};
      if (static_cast<int64_t>(SamplePatternNames().size()) == p.numel()) {
        j["label"] = SamplePatternNames()[static_cast<size_t>(best)];
      }
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out << j.dump() << "\n";
      out.close();
      if (!out) return Internal("writing " + path);
      return Status::Ok();
    }
    torch::Tensor rgb;
    if (convention_.output == "ab") {
      rgb = LabNormToRgb(input, output);
    } else {
      rgb = FromRange(output, *convention_.range).clamp(0.0, 1.0);
      if (gray_source_stays_gray_ && source_channels == 1 && rgb.size(0) == 3) rgb = Luma(rgb);
    }
    TESSERA_ASSIGN_OR_RETURN(Image image, TensorToImage(rgb));
    return WritePng(path, image);
  } catch (const std::exception& e) {
    return Internal("writing " + path + ": " + e.what());
  }
}

Result<torch::Tensor> RunImage(InferenceModel& model, const torch::Tensor& input,
                               const std::optional<TileSpec>& tiles) {
  if (!model.spatial()) return model.Forward(input);
  try {
    const int64_t h = input.size(1), w = input.size(2);
    const torch::Tensor padded = PadForModel(input, model.geometry().align_px);
    const int64_t hp = padded.size(1), wp = padded.size(2);
    torch::Tensor out;
    if (!tiles || (hp <= tiles->tile_px && wp <= tiles->tile_px)) {
      TESSERA_ASSIGN_OR_RETURN(out, model.Forward(padded));
    } else {
      const TileGrid grid = MakeTileGrid(hp, wp, *tiles);
      for (const Tile& t : grid.tiles) {
        TESSERA_ASSIGN_OR_RETURN(torch::Tensor tile_out, model.Forward(CropTileInput(padded, t)));
        if (!out.defined()) out = torch::empty({tile_out.size(0), hp, wp});
        PlaceOwnedPart(out, OwnedPart(tile_out, t), t);
      }
    }
    return out.narrow(1, 0, h).narrow(2, 0, w).contiguous();
  } catch (const std::exception& e) {
    return Internal(std::string("running ") + model.name() + ": " + e.what());
  }
}

bool RunsWhole(const InferenceModel& model, const torch::Tensor& input,
               const std::optional<TileSpec>& tiles) {
  if (!model.spatial() || !tiles) return true;
  const int64_t align = model.geometry().align_px;
  return PadTo(input.size(1), align) <= tiles->tile_px &&
         PadTo(input.size(2), align) <= tiles->tile_px;
}

Result<std::vector<torch::Tensor>> RunBatch(InferenceModel& model,
                                            const std::vector<torch::Tensor>& inputs) {
  if (inputs.empty()) return InvalidArgument("an empty batch", "batch");
  try {
    const int64_t h = inputs[0].size(1), w = inputs[0].size(2);
    std::vector<torch::Tensor> padded;
    padded.reserve(inputs.size());
    for (const torch::Tensor& in : inputs) {
      if (in.sizes() != inputs[0].sizes()) {
        return InvalidArgument("inputs of different shapes in one batch", "batch");
      }
      padded.push_back(model.spatial() ? PadForModel(in, model.geometry().align_px) : in);
    }
    TESSERA_ASSIGN_OR_RETURN(torch::Tensor out, model.ForwardBatch(torch::stack(padded)));
    std::vector<torch::Tensor> outs;
    outs.reserve(inputs.size());
    for (int64_t i = 0; i < out.size(0); ++i) {
      torch::Tensor o = out[i];
      if (model.spatial()) o = o.narrow(1, 0, h).narrow(2, 0, w);
      outs.push_back(o.contiguous());
    }
    return outs;
  } catch (const std::exception& e) {
    return Internal(std::string("running ") + model.name() + ": " + e.what());
  }
}

}  // namespace tessera::worker
