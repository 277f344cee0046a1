#include "worker/data/image_folder_dataset.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <exception>
#include <filesystem>
#include <future>
#include <sstream>
#include <system_error>
#include <tuple>

#include "common/file_system.h"
#include "worker/data/color.h"
#include "worker/data/rng.h"
#include "worker/data/sample_images.h"

namespace tessera::worker {
namespace {

namespace fs = std::filesystem;

bool IsImageFile(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

Result<std::vector<std::string>> ListSource(const std::string& source) {
  std::error_code ec;
  const fs::path src(source);
  if (!fs::exists(src, ec)) return NotFound("dataset source " + source + " does not exist");
  std::vector<std::string> paths;
  if (fs::is_directory(src, ec)) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(src, ec)) {
      if (entry.is_regular_file(ec) && IsImageFile(entry.path())) files.push_back(entry.path());
    }
    if (ec) return Internal("listing " + source + ": " + ec.message());
    std::sort(files.begin(), files.end(),
              [](const fs::path& a, const fs::path& b) { return a.filename() < b.filename(); });
    for (const auto& f : files) paths.push_back(f.string());
  } else {
    Result<std::string> list = FileSystem::Default()->ReadFile(source);
    if (!list.ok()) return NotFound("cannot open list file " + source);
    std::istringstream in(*list);
    std::string line;
    int64_t line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
        line.pop_back();
      size_t start = 0;
      while (start < line.size() && std::isspace(static_cast<unsigned char>(line[start]))) ++start;
      line = line.substr(start);
      if (line.empty() || line[0] == '#') continue;
      fs::path p(line);
      if (p.is_relative()) p = src.parent_path() / p;
      if (!fs::is_regular_file(p, ec)) {
        return InvalidArgument(
            source + ":" + std::to_string(line_no) + ": no such image " + p.string(), "dataset");
      }
      paths.push_back(p.string());
    }
  }
  if (paths.empty()) return InvalidArgument("no images in " + source, "dataset");
  return paths;
}

// [C,H,W] float with the requested channel count.
torch::Tensor WithChannels(const torch::Tensor& t, int64_t channels) {
  if (t.size(0) == channels) return t;
  if (channels == 3) return t.expand({3, t.size(1), t.size(2)}).contiguous();
  // RGB -> gray (Rec. 601).
  return (0.299 * t[0] + 0.587 * t[1] + 0.114 * t[2]).unsqueeze(0);
}

// Per-pixel Lab of an RGB [3,H,W] tensor: returns ([1,H,W] l_norm, [2,H,W] ab_norm).
std::pair<torch::Tensor, torch::Tensor> ToLabNorm(const torch::Tensor& rgb) {
  const torch::Tensor src = rgb.contiguous();
  const int64_t h = src.size(1), w = src.size(2), n = h * w;
  torch::Tensor l = torch::empty({1, h, w});
  torch::Tensor ab = torch::empty({2, h, w});
  const float* p = src.data_ptr<float>();
  float* lp = l.data_ptr<float>();
  float* ap = ab.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    const Lab lab = RgbToLab(Rgb{p[i], p[n + i], p[2 * n + i]});
    lp[i] = NormalizeL(lab.l);
    ap[i] = NormalizeAb(lab.a);
    ap[n + i] = NormalizeAb(lab.b);
  }
  return {l, ab};
}

// ImageToTensor's value of each 8-bit level, made by ImageToTensor itself so the
// direct path below gives the tensor path's values exactly.
const std::array<float, 256>& LevelValues() {
  static const std::array<float, 256> values = [] {
    Image levels;
    levels.width = 256;
    levels.height = 1;
    levels.channels = 1;
    levels.pixels.resize(256);
    for (int k = 0; k < 256; ++k) levels.pixels[static_cast<size_t>(k)] = static_cast<uint8_t>(k);
    const torch::Tensor t = ImageToTensor(levels);
    std::array<float, 256> out{};
    std::copy_n(t.data_ptr<float>(), 256, out.begin());
    return out;
  }();
  return values;
}

// The colorize pair of an s x s crop at (y0, x0) of an image at least that large,
// flipped horizontally when `flip`, straight from its 8-bit pixels: the values the
// tensor path gives (ImageToTensor, WithChannels, crop, flip, ToLabNorm) without
// its intermediate float images.
std::pair<torch::Tensor, torch::Tensor> ColorizeCrop(const Image& image, int64_t s, int64_t y0,
                                                     int64_t x0, bool flip) {
  // SrgbToLinear of each level's value, so each pixel is LinearRgbToLab of three
  // look-ups (RgbToLab of the level values, bit for bit).
  static const std::array<double, 256> linear = [] {
    std::array<double, 256> out{};
    for (size_t k = 0; k < out.size(); ++k) out[k] = SrgbToLinear(LevelValues()[k]);
    return out;
  }();
  torch::Tensor l = torch::empty({1, s, s});
  torch::Tensor ab = torch::empty({2, s, s});
  float* lp = l.data_ptr<float>();
  float* ap = ab.data_ptr<float>();
  const int64_t n = s * s, c = image.channels;
  const bool color = c == 3;
  for (int64_t y = 0; y < s; ++y) {
    const uint8_t* row = image.pixels.data() + (y0 + y) * image.width * c;
    for (int64_t x = 0; x < s; ++x) {
      const uint8_t* p = row + (x0 + (flip ? s - 1 - x : x)) * c;
      const Lab lab = color ? LinearRgbToLab(linear[p[0]], linear[p[1]], linear[p[2]])
                            : LinearRgbToLab(linear[p[0]], linear[p[0]], linear[p[0]]);
      const int64_t i = y * s + x;
      lp[i] = NormalizeL(lab.l);
      ap[i] = NormalizeAb(lab.a);
      ap[n + i] = NormalizeAb(lab.b);
    }
  }
  return {l, ab};
}

}  // namespace

torch::Tensor ImageToTensor(const Image& image) {
  auto* data = const_cast<uint8_t*>(image.pixels.data());
  return torch::from_blob(data, {image.height, image.width, image.channels}, torch::kUInt8)
      .permute({2, 0, 1})
      .to(torch::kFloat)
      .div(255.0)
      .contiguous();
}

Result<Image> TensorToImage(const torch::Tensor& chw) {
  if (chw.dim() != 3 || (chw.size(0) != 1 && chw.size(0) != 3)) {
    return InvalidArgument("expected a [C,H,W] tensor with C = 1 or 3", "tensor");
  }
  const torch::Tensor hwc = (chw.detach().to(torch::kCPU, torch::kFloat).clamp(0.0, 1.0) * 255.0)
                                .round()
                                .to(torch::kUInt8)
                                .permute({1, 2, 0})
                                .contiguous();
  Image image = MakeImage(chw.size(2), chw.size(1), chw.size(0));
  std::copy_n(hwc.data_ptr<uint8_t>(), image.pixels.size(), image.pixels.begin());
  return image;
}

torch::Tensor LabNormToRgb(const torch::Tensor& l_norm, const torch::Tensor& ab_norm) {
  const torch::Tensor l = l_norm.detach().to(torch::kCPU, torch::kFloat).contiguous();
  const torch::Tensor ab = ab_norm.detach().to(torch::kCPU, torch::kFloat).contiguous();
  const int64_t h = l.size(1), w = l.size(2), n = h * w;
  torch::Tensor rgb = torch::empty({3, h, w});
  const float* lp = l.data_ptr<float>();
  const float* ap = ab.data_ptr<float>();
  float* out = rgb.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    const Rgb c =
        LabToRgb(Lab{DenormalizeL(lp[i]), DenormalizeAb(ap[i]), DenormalizeAb(ap[n + i])});
    out[i] = c.r;
    out[n + i] = c.g;
    out[2 * n + i] = c.b;
  }
  return rgb;
}

Result<std::shared_ptr<const ImageFolderDataset>> ImageFolderDataset::Open(
    const std::string& source, const DatasetOptions& options) {
  if (options.image_size < 1) return InvalidArgument("image_size must be positive", "image_size");
  if (options.channels != 1 && options.channels != 3) {
    return InvalidArgument("channels must be 1 or 3", "channels");
  }
  if (options.noise_sigma < 0) return InvalidArgument("noise_sigma must be >= 0", "noise_sigma");
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> paths, ListSource(source));
  std::vector<int64_t> labels(paths.size(), -1);
  if (options.task == DataTask::kClassify) {
    for (size_t i = 0; i < paths.size(); ++i) {
      labels[i] = SamplePatternLabel(fs::path(paths[i]).filename().string());
      if (labels[i] < 0) {
        return InvalidArgument(paths[i] + ": file name names no class (expected ...-<class>.png)",
                               "dataset");
      }
    }
  }
  return std::shared_ptr<const ImageFolderDataset>(
      new ImageFolderDataset(std::move(paths), std::move(labels), options));
}

Result<Example> ImageFolderDataset::Get(int64_t id, int64_t epoch) const {
  if (id < 0 || id >= size()) return InvalidArgument("sample id out of range", "id");
  TESSERA_ASSIGN_OR_RETURN(Image image, ReadImage(path(id)));
  try {
    const int64_t s = options_.image_size;
    Rng rng(MixSeeds({options_.seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(id)}));
    if (options_.task == DataTask::kColorize && options_.direct_colorize && image.height >= s &&
        image.width >= s && (image.channels == 1 || image.channels == 3)) {
      // The same draws as the tensor path below, in the same order.
      int64_t y0 = (image.height - s) / 2, x0 = (image.width - s) / 2;
      bool flip = false;
      if (options_.augment) {
        y0 = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(image.height - s + 1)));
        x0 = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(image.width - s + 1)));
        flip = rng.Uniform() < 0.5;
      }
      Example ex;
      ex.id = id;
      std::tie(ex.input, ex.target) = ColorizeCrop(image, s, y0, x0, flip);
      return ex;
    }
    const bool need_rgb = options_.task == DataTask::kColorize || options_.task == DataTask::kGan;
    torch::Tensor t = WithChannels(ImageToTensor(image), need_rgb ? 3 : options_.channels);
    int64_t h = t.size(1), w = t.size(2);
    if (h < s || w < s) {
      const double k = static_cast<double>(s) / static_cast<double>(std::min(h, w));
      h = std::max(s, static_cast<int64_t>(std::ceil(static_cast<double>(h) * k)));
      w = std::max(s, static_cast<int64_t>(std::ceil(static_cast<double>(w) * k)));
      t = torch::nn::functional::interpolate(t.unsqueeze(0),
                                             torch::nn::functional::InterpolateFuncOptions()
                                                 .size(std::vector<int64_t>{h, w})
                                                 .mode(torch::kBilinear)
                                                 .align_corners(false))
              .squeeze(0);
    }
    int64_t y0 = (h - s) / 2, x0 = (w - s) / 2;
    bool flip = false;
    if (options_.augment) {
      y0 = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(h - s + 1)));
      x0 = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(w - s + 1)));
      flip = rng.Uniform() < 0.5;
    }
    t = t.narrow(1, y0, s).narrow(2, x0, s);
    if (flip) t = t.flip({2});
    t = t.contiguous();

    Example ex;
    ex.id = id;
    switch (options_.task) {
      case DataTask::kColorize: {
        auto [l, ab] = ToLabNorm(t);
        ex.input = l;
        ex.target = ab;
        break;
      }
      case DataTask::kDenoise: {
        torch::Tensor noise = torch::empty_like(t);
        float* np = noise.data_ptr<float>();
        for (int64_t i = 0; i < noise.numel(); ++i) {
          np[i] = static_cast<float>(options_.noise_sigma * rng.Normal());
        }
        ex.input = t + noise;
        ex.target = t;
        break;
      }
      case DataTask::kClassify:
        ex.input = t;
        ex.target = torch::tensor(label(id), torch::kLong);
        break;
      case DataTask::kGan:
        ex.input = WithChannels(t, 1) * 2.0 - 1.0;
        ex.target = t * 2.0 - 1.0;
        break;
    }
    return ex;
  } catch (const std::exception& e) {
    return Internal("preparing " + path(id) + ": " + e.what());
  }
}

Result<Batch> ImageFolderDataset::GetBatch(const std::vector<int64_t>& ids, int64_t epoch,
                                           int threads) const {
  if (ids.empty()) return InvalidArgument("a batch needs at least one sample id", "ids");
  const size_t n = ids.size();
  std::vector<Result<Example>> examples(n, Result<Example>(Internal("not prepared")));
  // Contiguous runs of ids, one per thread; the calling thread prepares the first.
  const size_t parts = std::clamp<size_t>(static_cast<size_t>(std::max(threads, 1)), 1, n);
  auto prepare = [&](size_t part) {
    for (size_t i = part * n / parts; i < (part + 1) * n / parts; ++i) {
      examples[i] = Get(ids[i], epoch);
    }
  };
  std::vector<std::future<void>> others;
  others.reserve(parts - 1);
  for (size_t part = 1; part < parts; ++part) {
    others.push_back(std::async(std::launch::async, prepare, part));
  }
  prepare(0);
  for (auto& f : others) f.get();  // Get catches what it throws
  std::vector<torch::Tensor> inputs, targets;
  inputs.reserve(n);
  targets.reserve(n);
  for (Result<Example>& ex : examples) {
    if (!ex.ok()) return ex.status();  // the first failing id in batch order
    inputs.push_back(std::move(ex->input));
    targets.push_back(std::move(ex->target));
  }
  try {
    return Batch{torch::stack(inputs), torch::stack(targets), ids};
  } catch (const std::exception& e) {
    return Internal(std::string("stacking a batch: ") + e.what());
  }
}

std::unique_ptr<PrefetchLoader<Batch>> MakeBatchLoader(
    std::shared_ptr<const ImageFolderDataset> dataset, std::vector<std::vector<int64_t>> batches,
    int64_t epoch, int threads, int64_t capacity) {
  const auto count = static_cast<int64_t>(batches.size());
  auto produce = [dataset = std::move(dataset), batches = std::move(batches),
                  epoch](int64_t i) -> Result<Batch> {
    return dataset->GetBatch(batches[static_cast<size_t>(i)], epoch);
  };
  return std::make_unique<PrefetchLoader<Batch>>(std::move(produce), count, threads, capacity);
}

}  // namespace tessera::worker
