#include "scheduler/builtin_profiles.h"

#include <cstdint>

namespace tessera::scheduler {

namespace {

constexpr int64_t kFloatBytes = 4;

// Builds a layer list while tracking skip tensors that are still pending.
class Builder {
 public:
  Builder(std::string name, int px, int channels) {
    profile_.name = std::move(name);
    profile_.nominal_image_px = px;
    profile_.estimated = true;
    profile_.optimizer_state_multiplier = 2.0;  // Adam, fp32 state
    h_ = w_ = px;
    c_ = channels;
    profile_.input_bytes = static_cast<int64_t>(h_) * w_ * c_ * kFloatBytes;
  }

  // Convolution k x k, stride (down) or transposed (up > 1 multiplies size).
  Builder& Conv(const std::string& name, int cout, int k, int stride = 1, int up = 1,
                int extra_in = 0) {
    const int cin = c_ + extra_in;
    h_ = h_ / stride * up;
    w_ = w_ / stride * up;
    const double out_px = static_cast<double>(h_) * w_;
    Layer l;
    l.name = name;
    l.forward_flops = 2.0 * out_px * cin * cout * k * k;
    l.parameter_bytes = (static_cast<int64_t>(cin) * cout * k * k + cout) * kFloatBytes;
    const int64_t out = static_cast<int64_t>(out_px) * cout * kFloatBytes;
    l.activation_bytes = 2 * out;
    c_ = cout;
    l.output_bytes = out + pending_;
    profile_.layers.push_back(std::move(l));
    return *this;
  }

  Builder& Dense(const std::string& name, int in, int out) {
    Layer l;
    l.name = name;
    l.forward_flops = 2.0 * in * out;
    l.parameter_bytes = (static_cast<int64_t>(in) * out + out) * kFloatBytes;
    l.activation_bytes = static_cast<int64_t>(out) * kFloatBytes;
    l.output_bytes = l.activation_bytes + pending_;
    h_ = w_ = 1;
    c_ = out;
    profile_.layers.push_back(std::move(l));
    return *this;
  }

  // Keep the current output for a later concatenation.
  Builder& PushSkip() {
    const int64_t bytes = static_cast<int64_t>(h_) * w_ * c_ * kFloatBytes;
    skips_.push_back({bytes, c_});
    pending_ += bytes;
    profile_.layers.back().output_bytes += bytes;
    return *this;
  }
  // Channels of the skip consumed by the next layer (it is concatenated there).
  int PopSkip() {
    auto [bytes, channels] = skips_.back();
    skips_.pop_back();
    pending_ -= bytes;
    return channels;
  }

  ModelProfile Build(int halo) {
    profile_.halo_px = halo;
    return std::move(profile_);
  }

 private:
  ModelProfile profile_;
  int h_ = 0, w_ = 0, c_ = 0;
  int64_t pending_ = 0;
  std::vector<std::pair<int64_t, int>> skips_;
};

ModelProfile ColorizeUnet() {
  Builder b("colorize-unet", 256, 1);
  const int ch[] = {64, 128, 256, 512};
  for (int i = 0; i < 4; ++i) {
    const std::string n = "enc" + std::to_string(i + 1);
    b.Conv(n + "a", ch[i], 3, i == 0 ? 1 : 2).Conv(n + "b", ch[i], 3).PushSkip();
  }
  b.Conv("bottleneck_a", 1024, 3, 2).Conv("bottleneck_b", 1024, 3);
  for (int i = 3; i >= 0; --i) {
    const std::string n = "dec" + std::to_string(i + 1);
    b.Conv(n + "_up", ch[i], 2, 1, 2);
    const int skip = b.PopSkip();
    b.Conv(n + "a", ch[i], 3, 1, 1, skip).Conv(n + "b", ch[i], 3);
  }
  b.Conv("head_ab", 2, 1);
  return b.Build(92);
}

ModelProfile DenoiserDncnn() {
  Builder b("denoiser-dncnn", 256, 3);
  b.Conv("conv1", 64, 3);
  for (int i = 2; i <= 16; ++i) b.Conv("conv" + std::to_string(i), 64, 3);
  b.Conv("conv17", 3, 3);
  return b.Build(17);
}

ModelProfile ClassifierResnet() {
  Builder b("classifier-resnet", 256, 3);
  b.Conv("stem", 64, 7, 2).Conv("pool", 64, 1, 2);
  const int ch[] = {64, 128, 256, 512};
  for (int s = 0; s < 4; ++s) {
    for (int blk = 0; blk < 2; ++blk) {
      const std::string n = "layer" + std::to_string(s + 1) + "." + std::to_string(blk);
      const int stride = (s > 0 && blk == 0) ? 2 : 1;
      b.Conv(n + ".conv1", ch[s], 3, stride).Conv(n + ".conv2", ch[s], 3);
    }
  }
  b.Dense("fc", 512, 1000);
  ModelProfile p = b.Build(0);
  return p;
}

ModelProfile GanPix2Pix() {
  // Generator: U-Net with 8 down / 8 up 4x4 convolutions; discriminator: 70x70 PatchGAN.
  Builder b("gan-pix2pix", 256, 3);
  const int down[] = {64, 128, 256, 512, 512, 512, 512, 512};
  for (int i = 0; i < 8; ++i) {
    b.Conv("g.down" + std::to_string(i + 1), down[i], 4, 2);
    if (i < 7) b.PushSkip();
  }
  int skip = 0;
  for (int i = 6; i >= 0; --i) {
    b.Conv("g.up" + std::to_string(7 - i), down[i], 4, 1, 2, skip);
    skip = b.PopSkip();  // concatenated into the next layer's input
  }
  b.Conv("g.out", 3, 4, 1, 2, skip);
  b.Conv("d.conv1", 64, 4, 2, 1, 3).Conv("d.conv2", 128, 4, 2).Conv("d.conv3", 256, 4, 2);
  b.Conv("d.conv4", 512, 4).Conv("d.out", 1, 4);
  return b.Build(35);
}

}  // namespace

std::vector<std::string> BuiltinProfileNames() {
  return {"colorize-unet", "denoiser-dncnn", "classifier-resnet", "gan-pix2pix"};
}

Result<ModelProfile> BuiltinProfile(std::string_view name) {
  if (name.starts_with("builtin:")) name.remove_prefix(8);
  if (name == "colorize-unet") return ColorizeUnet();
  if (name == "denoiser-dncnn") return DenoiserDncnn();
  if (name == "classifier-resnet") return ClassifierResnet();
  if (name == "gan-pix2pix") return GanPix2Pix();
  return NotFound("no builtin model profile '" + std::string(name) + "'");
}

}  // namespace tessera::scheduler
