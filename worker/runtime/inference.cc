#include "worker/runtime/inference.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "worker/data/color.h"
#include "worker/data/image_folder_dataset.h"
#include "worker/data/sample_images.h"
#include "worker/model/gan.h"
#include "worker/runtime/checkpoint.h"
#include "worker/runtime/collectives.h"
#include "worker/runtime/plan.h"
#include "worker/runtime/progress_writer.h"

namespace tessera::worker {
namespace fs = std::filesystem;
namespace {

using SteadyClock = std::chrono::steady_clock;
using nlohmann::json;

double Since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

int64_t UnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr char kColorize[] = "colorize-unet";
constexpr char kDenoiser[] = "denoiser-dncnn";
constexpr char kClassifier[] = "classifier-resnet";
constexpr char kGan[] = "gan-pix2pix";

bool KnownModel(const std::string& name) {
  return name == kColorize || name == kDenoiser || name == kClassifier || name == kGan;
}

int64_t InputChannels(const std::string& name) { return name == kColorize || name == kGan ? 1 : 3; }

Result<std::shared_ptr<LayeredModel>> BuildNet(const std::string& name, const ModelConfig& mc) {
  if (name == kGan) {
    TESSERA_ASSIGN_OR_RETURN(Gan gan, MakeGan(name, mc));
    return gan.generator;
  }
  return MakeModel(name, mc);
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool IsImageName(const fs::path& p) {
  const std::string ext = Lower(p.extension().string());
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

// Renews the rank's leases from a background thread while a chunk is being
// processed (every call renews all leases the rank holds).
class LeaseKeeper {
 public:
  LeaseKeeper(ChunkSource& source, int64_t lease_ms) : source_(source) {
    if (lease_ms <= 0) return;
    const auto interval = std::chrono::milliseconds(std::max<int64_t>(100, lease_ms / 3));
    thread_ = std::thread([this, interval] {
      std::unique_lock<std::mutex> lock(mu_);
      while (!cv_.wait_for(lock, interval, [this] { return done_; })) {
        lock.unlock();
        Result<api::LeaseResponse> r = source_.Lease({}, 0);
        if (!r.ok() && !warned_) {
          warned_ = true;
          std::fprintf(stderr, "tessera-worker: renewing leases failed: %s\n",
                       r.status().ToString().c_str());
        }
        lock.lock();
      }
    });
  }
  ~LeaseKeeper() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

 private:
  ChunkSource& source_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool warned_ = false;
  std::thread thread_;
};

}  // namespace

// ---- InferenceModel ----

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
    model->device_ = dev;
    model->emulated_ = EmulatedDevice(device_speed, torch::get_num_threads());
    return Result<std::unique_ptr<InferenceModel>>(std::move(model));
  } catch (const std::exception& e) {
    return Internal("loading " + model_name + " from " + checkpoint_dir + ": " + e.what());
  }
}

Result<torch::Tensor> InferenceModel::Prepare(const Image& image) const {
  try {
    torch::Tensor t = ImageToTensor(image);
    if (t.size(0) == 1) t = t.expand({3, t.size(1), t.size(2)}).contiguous();
    if (name_ == kColorize) {
      const int64_t h = t.size(1), w = t.size(2), n = h * w;
      torch::Tensor l = torch::empty({1, h, w});
      const float* p = t.data_ptr<float>();
      float* lp = l.data_ptr<float>();
      for (int64_t i = 0; i < n; ++i) {
        lp[i] = NormalizeL(RgbToLab(Rgb{p[i], p[n + i], p[2 * n + i]}).l);
      }
      return l;
    }
    if (name_ == kGan) {
      // As the training data: Rec. 601 gray of the RGB image, in [-1, 1].
      return ((0.299 * t[0] + 0.587 * t[1] + 0.114 * t[2]).unsqueeze(0) * 2.0 - 1.0).contiguous();
    }
    return t;
  } catch (const std::exception& e) {
    return Internal(std::string("preparing the model input: ") + e.what());
  }
}

Result<torch::Tensor> InferenceModel::Forward(const torch::Tensor& chw) {
  try {
    torch::NoGradGuard no_grad;
    // One compute segment of the (emulated) device, as training's (stage_runner.cc).
    const EmulatedDevice::Segment segment = emulated_.Begin();
    Activation a;
    a.main = chw.unsqueeze(0).to(device_);
    a = net_->Forward(std::move(a), 0, net_->num_layers());
    torch::Tensor out = a.main.squeeze(0).to(torch::kCPU, torch::kFloat).contiguous();
    emulated_.End(segment);
    return out;
  } catch (const std::exception& e) {
    return Internal(name_ + " forward failed: " + e.what());
  }
}

Status InferenceModel::WriteOutput(const std::string& path, const std::string& item,
                                   int64_t source_channels, const torch::Tensor& input,
                                   const torch::Tensor& output) const {
  try {
    if (!spatial_) {
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
    if (name_ == kColorize) {
      rgb = LabNormToRgb(input, output);
    } else if (name_ == kGan) {
      rgb = (output + 1.0) * 0.5;
    } else {
      rgb = output.clamp(0.0, 1.0);
      if (source_channels == 1 && rgb.size(0) == 3) {
        rgb = (0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]).unsqueeze(0);
      }
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

// ---- items and outputs ----

std::string DataRoot(const std::string& data) {
  std::error_code ec;
  if (fs::is_directory(data, ec)) return data;
  fs::path parent = fs::path(data).parent_path();
  return parent.empty() ? "." : parent.string();
}

Result<std::vector<std::string>> ListInputItems(const std::string& data,
                                                const std::string& exclude_dir) {
  std::error_code ec;
  if (data.empty()) return InvalidArgument("an input folder or list file is required", "data");
  if (!fs::exists(data, ec)) return InvalidArgument("input " + data + " does not exist", "data");
  std::vector<std::string> items;
  if (fs::is_directory(data, ec)) {
    const fs::path root(data);
    fs::path exclude;
    if (!exclude_dir.empty()) exclude = fs::weakly_canonical(exclude_dir, ec);
    fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
    if (ec)
      return InvalidArgument("cannot read input folder " + data + ": " + ec.message(), "data");
    for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) {
        return InvalidArgument("cannot read input folder " + data + ": " + ec.message(), "data");
      }
      const fs::path& p = it->path();
      const std::string name = p.filename().string();
      if (it->is_directory(ec)) {
        std::error_code cec;
        const bool excluded = !exclude.empty() && fs::weakly_canonical(p, cec) == exclude;
        if (excluded || (!name.empty() && name[0] == '.')) it.disable_recursion_pending();
        continue;
      }
      if (name.empty() || name[0] == '.' || !IsImageName(p)) continue;
      items.push_back(p.lexically_relative(root).generic_string());
    }
    std::sort(items.begin(), items.end());
  } else {
    std::ifstream in(data);
    if (!in) return InvalidArgument("cannot read list file " + data, "data");
    std::string line;
    while (std::getline(in, line)) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      const size_t start = line.find_first_not_of(" \t");
      if (start == std::string::npos || line[start] == '#') continue;
      items.push_back(line.substr(start));
    }
  }
  if (items.empty()) return InvalidArgument("no images in " + data, "data");
  return items;
}

Result<std::string> OutputPathFor(const std::string& output_dir, const std::string& data_root,
                                  const std::string& item, const std::string& extension) {
  if (item.empty()) return InvalidArgument("empty item", "item");
  fs::path p(item);
  if (p.is_absolute()) {
    const fs::path rel =
        p.lexically_normal().lexically_relative(fs::path(data_root).lexically_normal());
    const std::string first = rel.empty() ? std::string() : rel.begin()->string();
    if (!rel.empty() && first != ".." && !data_root.empty() && fs::path(data_root).is_absolute()) {
      p = rel;
    } else {
      p = p.relative_path();
    }
  }
  p = p.lexically_normal();
  if (p.empty() || p == "." || p.begin()->string() == ".." || p.filename().empty()) {
    return InvalidArgument("item \"" + item + "\" leaves the output folder", "item");
  }
  std::string name = p.generic_string();
  if (Lower(p.extension().string()) != extension) name += extension;
  return (fs::path(output_dir) / name).string();
}

// ---- plan ----

Result<InferPlan> ParseInferPlan(const std::string& json_text, int world_size) {
  TESSERA_ASSIGN_OR_RETURN(json doc, ParsePlanDocument(json_text));
  InferPlan plan;
  plan.rank_weights.assign(static_cast<size_t>(std::max(1, world_size)), 0);
  auto layout = doc.find("layout");
  if (layout != doc.end()) {
    if (!layout->is_string()) return InvalidArgument("must be a string", "layout");
    plan.layout = layout->get<std::string>();
  }
  auto replicas = doc.find("replicas");
  if (replicas != doc.end()) {
    if (!replicas->is_array()) return InvalidArgument("must be an array", "replicas");
    for (size_t r = 0; r < replicas->size(); ++r) {
      const json& rep = (*replicas)[r];
      const std::string rf = "replicas[" + std::to_string(r) + "]";
      if (!rep.is_object()) return InvalidArgument("must be an object", rf);
      int64_t batch = 1;
      if (rep.contains("batch")) {
        if (!rep["batch"].is_number_integer() || rep["batch"].get<int64_t>() < 0) {
          return InvalidArgument("must be an integer >= 0", rf + ".batch");
        }
        batch = rep["batch"].get<int64_t>();
      }
      if (!rep.contains("stages") || !rep["stages"].is_array()) {
        return InvalidArgument("must be an array of stages", rf + ".stages");
      }
      for (size_t s = 0; s < rep["stages"].size(); ++s) {
        const json& st = rep["stages"][s];
        const std::string sf = rf + ".stages[" + std::to_string(s) + "].rank";
        if (!st.is_object() || !st.contains("rank") || !st["rank"].is_number_integer()) {
          return InvalidArgument("must be an integer", sf);
        }
        const int64_t rank = st["rank"].get<int64_t>();
        if (rank < 0 || rank >= world_size) {
          return InvalidArgument("rank " + std::to_string(rank) + " outside world of size " +
                                     std::to_string(world_size),
                                 sf);
        }
        plan.rank_weights[static_cast<size_t>(rank)] = batch;
      }
    }
  }
  auto tiling = doc.find("tiling");
  if (tiling != doc.end() && !tiling->is_null()) {
    if (!tiling->is_object()) return InvalidArgument("must be an object", "tiling");
    TileSpec spec;
    for (auto [key, dst] : {std::pair<const char*, int64_t*>{"tile_px", &spec.tile_px},
                            std::pair<const char*, int64_t*>{"overlap_px", &spec.overlap_px}}) {
      auto v = tiling->find(key);
      if (v == tiling->end() || !v->is_number_integer() || v->get<int64_t>() < 0) {
        return InvalidArgument("must be an integer >= 0", std::string("tiling.") + key);
      }
      *dst = v->get<int64_t>();
    }
    if (spec.tile_px <= 0) return InvalidArgument("must be positive", "tiling.tile_px");
    plan.tiling = spec;
  }
  return plan;
}

namespace {

// ---- distributed tiles ----

enum class TiledCommand : int64_t { kAbort = -1, kDone = 0, kImage = 1 };
constexpr int kTileTag = 7;

// Tiled layout over c10d: rank 0 broadcasts each image's model input, every
// rank runs its share of the tiles, rank 0 gathers the owned parts.
class TiledRanks {
 public:
  TiledRanks(Collectives& world, InferenceModel& model, TileSpec spec, std::vector<int64_t> weights,
             torch::Device comm_device)
      : world_(world),
        model_(model),
        spec_(spec),
        weights_(std::move(weights)),
        comm_device_(comm_device) {}

  // Rank 0: the assembled output of one prepared input.
  Result<torch::Tensor> Run(const torch::Tensor& input) {
    try {
      torch::Tensor header = torch::tensor(
          {static_cast<int64_t>(TiledCommand::kImage), input.size(0), input.size(1), input.size(2)},
          torch::kLong);
      TESSERA_RETURN_IF_ERROR(Bcast(header));
      torch::Tensor data = input.to(torch::kFloat).contiguous();
      TESSERA_RETURN_IF_ERROR(Bcast(data));
      return Compute(data);
    } catch (const std::exception& e) {
      return Internal(std::string("tiled run: ") + e.what());
    }
  }

  // Rank 0: tells the others to stop (abort: rank 0 failed).
  Status Finish(bool abort) {
    try {
      const auto cmd = abort ? TiledCommand::kAbort : TiledCommand::kDone;
      torch::Tensor header = torch::tensor({static_cast<int64_t>(cmd), 0L, 0L, 0L}, torch::kLong);
      return Bcast(header);
    } catch (const std::exception& e) {
      return Internal(std::string("tiled finish: ") + e.what());
    }
  }

  // Ranks > 0: serve until rank 0 says done; returns the images served.
  Result<int64_t> Serve() {
    int64_t images = 0;
    try {
      while (true) {
        torch::Tensor header = torch::zeros({4}, torch::kLong);
        TESSERA_RETURN_IF_ERROR(Bcast(header));
        const auto cmd = static_cast<TiledCommand>(header[0].item<int64_t>());
        if (cmd == TiledCommand::kDone) return images;
        if (cmd == TiledCommand::kAbort) return Internal("rank 0 stopped with an error");
        torch::Tensor data = torch::zeros(
            {header[1].item<int64_t>(), header[2].item<int64_t>(), header[3].item<int64_t>()});
        TESSERA_RETURN_IF_ERROR(Bcast(data));
        Result<torch::Tensor> done = Compute(data);
        if (!done.ok()) return done.status();
        ++images;
      }
    } catch (const std::exception& e) {
      return Internal(std::string("tiled serve: ") + e.what());
    }
  }

 private:
  Status Bcast(torch::Tensor& t) {
    torch::Tensor on = t.to(comm_device_);
    TESSERA_RETURN_IF_ERROR(world_.Broadcast({on}, 0));
    if (on.device() != t.device()) t.copy_(on.to(t.device()));
    return Status::Ok();
  }

  // Every rank: runs its share; rank 0 returns the assembled output, others
  // send their owned parts to rank 0 and return an undefined tensor.
  Result<torch::Tensor> Compute(const torch::Tensor& input) {
    const int64_t h = input.size(1), w = input.size(2);
    const torch::Tensor padded = PadForModel(input, model_.geometry().align_px);
    const int64_t hp = padded.size(1), wp = padded.size(2);
    const TileGrid grid = MakeTileGrid(hp, wp, spec_);
    const int64_t n = static_cast<int64_t>(grid.tiles.size());
    const std::vector<Span> ranges = ShareRanges(n, weights_);
    const int me = world_.rank();
    const Span mine = ranges[static_cast<size_t>(me)];
    std::vector<torch::Tensor> parts;
    for (int64_t i = mine.begin; i < mine.end; ++i) {
      const Tile& t = grid.tiles[static_cast<size_t>(i)];
      TESSERA_ASSIGN_OR_RETURN(torch::Tensor out, model_.Forward(CropTileInput(padded, t)));
      parts.push_back(OwnedPart(out, t));
      ++tiles_computed_;
    }
    if (me != 0) {
      if (parts.empty()) return torch::Tensor();
      std::vector<torch::Tensor> flat;
      for (auto& p : parts) flat.push_back(p.reshape({-1}));
      torch::Tensor msg = torch::cat(flat).to(comm_device_);
      TESSERA_RETURN_IF_ERROR(world_.SendAsync({msg}, 0, kTileTag)->Wait());
      return torch::Tensor();
    }
    if (out_channels_ == 0) {
      if (!parts.empty()) {
        out_channels_ = parts.front().size(0);
      } else {
        TESSERA_ASSIGN_OR_RETURN(out_channels_, ProbeOutputChannels());
      }
    }
    torch::Tensor canvas = torch::empty({out_channels_, hp, wp});
    for (int64_t i = mine.begin; i < mine.end; ++i) {
      PlaceOwnedPart(canvas, parts[static_cast<size_t>(i - mine.begin)],
                     grid.tiles[static_cast<size_t>(i)]);
    }
    for (int r = 1; r < world_.size(); ++r) {
      const Span theirs = ranges[static_cast<size_t>(r)];
      if (theirs.size() == 0) continue;
      int64_t pixels = 0;
      for (int64_t i = theirs.begin; i < theirs.end; ++i) {
        const Tile& t = grid.tiles[static_cast<size_t>(i)];
        pixels += t.own_y.size() * t.own_x.size();
      }
      torch::Tensor buf =
          torch::empty({out_channels_ * pixels}, torch::TensorOptions().device(comm_device_));
      TESSERA_RETURN_IF_ERROR(world_.Recv({buf}, r, kTileTag));
      buf = buf.to(torch::kCPU);
      int64_t at = 0;
      for (int64_t i = theirs.begin; i < theirs.end; ++i) {
        const Tile& t = grid.tiles[static_cast<size_t>(i)];
        const int64_t count = out_channels_ * t.own_y.size() * t.own_x.size();
        PlaceOwnedPart(
            canvas, buf.narrow(0, at, count).view({out_channels_, t.own_y.size(), t.own_x.size()}),
            t);
        at += count;
      }
    }
    return canvas.narrow(1, 0, h).narrow(2, 0, w).contiguous();
  }

  // Output channels from a forward pass on a small blank input (rank 0 had
  // no tile of the first image).
  Result<int64_t> ProbeOutputChannels() {
    const int64_t side = 2 * model_.geometry().align_px;
    const int64_t c = InputChannels(model_.name());
    TESSERA_ASSIGN_OR_RETURN(torch::Tensor out, model_.Forward(torch::zeros({c, side, side})));
    return out.size(0);
  }

  Collectives& world_;
  InferenceModel& model_;
  TileSpec spec_;
  std::vector<int64_t> weights_;
  torch::Device comm_device_;
  int64_t out_channels_ = 0;

 public:
  int64_t tiles_computed() const { return tiles_computed_; }

 private:
  int64_t tiles_computed_ = 0;
};

enum class ItemResult { kWritten, kSkipped, kFailed };

struct LoopContext {
  const InferOptions* options = nullptr;
  const DistEnv* env = nullptr;
  InferenceModel* model = nullptr;
  std::string data_root;
  // Runs the model on a prepared input (local, possibly tiled, or across ranks).
  std::function<Result<torch::Tensor>(const torch::Tensor&)> compute;
};

Result<ItemResult> ProcessItem(const LoopContext& ctx, const std::string& item) {
  const InferOptions& o = *ctx.options;
  if (o.before_item) TESSERA_RETURN_IF_ERROR(o.before_item(item));
  auto out_path = OutputPathFor(o.output, ctx.data_root, item, ctx.model->output_extension());
  if (!out_path.ok()) {
    std::fprintf(stderr, "tessera-worker: skipping item \"%s\": %s\n", item.c_str(),
                 out_path.status().message().c_str());
    return ItemResult::kFailed;
  }
  std::error_code ec;
  if (fs::exists(*out_path, ec)) return ItemResult::kSkipped;
  TESSERA_ASSIGN_OR_RETURN(int64_t removed, RemoveStaleTemps(*out_path));
  if (removed > 0) {
    std::fprintf(stderr, "tessera-worker: removed %lld stale temporary file(s) of %s\n",
                 static_cast<long long>(removed), out_path->c_str());
  }
  const std::string error_note = *out_path + ".error.txt";
  const fs::path source =
      fs::path(item).is_absolute() ? fs::path(item) : fs::path(ctx.data_root) / item;
  Result<Image> image = ReadImage(source.string());
  if (!image.ok()) {
    std::fprintf(stderr, "tessera-worker: cannot read %s: %s\n", source.c_str(),
                 image.status().ToString().c_str());
    TESSERA_RETURN_IF_ERROR(RemoveStaleTemps(error_note).status());
    TESSERA_RETURN_IF_ERROR(
        WriteFileAtomically(error_note, image.status().ToString() + "\n", o.write_faults));
    return ItemResult::kFailed;
  }
  TESSERA_ASSIGN_OR_RETURN(torch::Tensor input, ctx.model->Prepare(*image));
  TESSERA_ASSIGN_OR_RETURN(torch::Tensor output, ctx.compute(input));
  auto write = [&](const std::string& tmp) {
    return ctx.model->WriteOutput(tmp, item, image->channels, input, output);
  };
  Status s = WriteAtomically(*out_path, write, o.write_faults);
  if (s.code() == StatusCode::kUnavailable) s = WriteAtomically(*out_path, write, o.write_faults);
  TESSERA_RETURN_IF_ERROR(s);
  fs::remove(error_note, ec);
  return ItemResult::kWritten;
}

// Reports finished chunks without asking for more.
Status ReportDone(ChunkSource& source, const std::vector<api::CompletedChunk>& completed) {
  if (completed.empty()) return Status::Ok();
  return source.Lease(completed, 0).status();
}

// Leases chunks until the source says finished (or a stop), processing every
// item through ProcessItem.
Status LeaseLoop(const LoopContext& ctx, ChunkSource& source, const std::atomic<bool>& stop,
                 InferOutcome* outcome) {
  const InferOptions& o = *ctx.options;
  ProgressWriter progress(ctx.env->progress_file, /*stdout_fallback=*/true);
  std::vector<api::CompletedChunk> completed;
  const auto start = SteadyClock::now();
  int64_t images_done = 0;
  while (true) {
    const int64_t ask = stop.load() ? 0 : std::clamp<int64_t>(o.max_chunks, 1, 64);
    TESSERA_ASSIGN_OR_RETURN(api::LeaseResponse lease, source.Lease(completed, ask));
    completed.clear();
    if (lease.finished) return Status::Ok();
    if (stop.load()) {
      outcome->stopped = true;
      return Status::Ok();
    }
    if (lease.chunks.empty()) {
      const auto wait = std::chrono::milliseconds(std::max<int64_t>(50, lease.retry_after_ms));
      const auto until = SteadyClock::now() + wait;
      while (SteadyClock::now() < until && !stop.load()) {
        std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
            std::chrono::milliseconds(50),
            std::chrono::duration_cast<std::chrono::milliseconds>(until - SteadyClock::now())));
      }
      continue;
    }
    LeaseKeeper keeper(source, lease.lease_ms);
    for (const api::LeasedChunk& chunk : lease.chunks) {
      const auto chunk_start = SteadyClock::now();
      int64_t images = 0;
      for (const std::string& item : chunk.items) {
        if (stop.load()) {
          // This chunk stays unreported (its lease expires; written items are
          // skipped later); earlier chunks of the same lease are reported.
          outcome->stopped = true;
          return ReportDone(source, completed);
        }
        Result<ItemResult> r = ProcessItem(ctx, item);
        if (!r.ok()) {
          ReportDone(source, completed).IgnoreError();  // best effort; the error wins
          return r.status();
        }
        switch (*r) {
          case ItemResult::kWritten:
            ++outcome->written;
            ++images;
            break;
          case ItemResult::kSkipped:
            ++outcome->skipped;
            break;
          case ItemResult::kFailed:
            ++outcome->failed;
            break;
        }
      }
      const double seconds = Since(chunk_start);
      completed.push_back({chunk.chunk, images, seconds});
      ++outcome->chunks;
      images_done += images;
      const double wall = Since(start);
      progress.Write({{"chunk", chunk.chunk},
                      {"chunks_done", outcome->chunks},
                      {"images_done", images_done},
                      {"images_skipped", outcome->skipped},
                      {"images_failed", outcome->failed},
                      {"images_per_s", wall > 0 ? static_cast<double>(images_done) / wall : 0.0},
                      {"chunk_s", seconds},
                      {"ts_ms", UnixMillis()},
                      {"rank", ctx.env->rank}});
    }
  }
}

// Items of --data for a local run: rank r of W takes chunks r, r + W, ...
std::vector<std::string> LocalShare(const std::vector<std::string>& items, int64_t chunk_size,
                                    int rank, int world) {
  if (world <= 1) return items;
  std::vector<std::string> out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (static_cast<int64_t>(i) / chunk_size % world == rank) out.push_back(items[i]);
  }
  return out;
}

Result<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("cannot read plan file " + path, "TESSERA_PLAN");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Result<InferOutcome> RunInference(const InferOptions& o, const DistEnv& env,
                                  const std::atomic<bool>& stop_requested, ChunkSource* source) {
  torch::set_num_threads(std::max(1, o.threads));
  if (o.output.empty()) return InvalidArgument("an output folder is required", "output");
  if (o.max_tile_px < 0) return InvalidArgument("must not be negative", "max-tile-px");
  if (o.local_chunk_size < 1) return InvalidArgument("must be positive", "chunk-size");

  InferPlan plan;
  plan.rank_weights.assign(static_cast<size_t>(std::max(1, env.world_size)), 1);
  if (!env.plan_path.empty()) {
    TESSERA_ASSIGN_OR_RETURN(std::string text, ReadText(env.plan_path));
    Result<InferPlan> parsed = ParseInferPlan(text, env.world_size);
    if (!parsed.ok()) return parsed.status().WithPrefix("TESSERA_PLAN " + env.plan_path);
    plan = std::move(parsed).value();
  }
  const bool tiled_layout = plan.layout == "tiled";
  const bool distributed_tiles = tiled_layout && env.world_size > 1;
  if (distributed_tiles && o.model == kClassifier) {
    return InvalidArgument("classifier-resnet cannot run a tiled layout (global pooling)",
                           "TESSERA_PLAN");
  }

  // Items are needed by whoever leases: every rank, or rank 0 of a tiled layout.
  const bool leases = !distributed_tiles || env.rank == 0;
  std::vector<std::string> items;
  if (leases && o.local && source == nullptr) {
    TESSERA_ASSIGN_OR_RETURN(items, ListInputItems(o.data, o.output));
  } else if (leases) {
    std::error_code ec;
    if (o.data.empty() || !fs::exists(o.data, ec)) {
      return InvalidArgument("input " + o.data + " does not exist", "data");
    }
  }
  TESSERA_ASSIGN_OR_RETURN(auto model, InferenceModel::Load(o.model, o.checkpoint, o.width,
                                                            env.device, env.device_speed));
  std::optional<TileSpec> tiles;
  if (model->spatial()) {
    std::optional<TileSpec> requested = tiled_layout ? plan.tiling : std::nullopt;
    if (!requested && o.max_tile_px > 0) requested = TileSpec{o.max_tile_px, 0};
    if (requested) {
      Result<TileSpec> eff = EffectiveTileSpec(*requested, model->geometry());
      if (!eff.ok()) return eff.status();
      tiles = *eff;
    } else if (distributed_tiles) {
      return InvalidArgument("a tiled plan needs \"tiling\": {\"tile_px\", ...} or --max-tile-px",
                             "TESSERA_PLAN");
    }
  }
  std::error_code ec;
  fs::create_directories(o.output, ec);
  if (ec) return InvalidArgument("cannot create output folder " + o.output, "output");
  if (env.rank == 0) {
    std::fprintf(stderr, "tessera-worker: %s from %s/%s, layout %s, %s\n", o.model.c_str(),
                 o.checkpoint.c_str(), StepDirName(model->checkpoint_step()).c_str(),
                 plan.layout.c_str(),
                 tiles ? ("tiles of " + std::to_string(tiles->tile_px) + " px, overlap " +
                          std::to_string(tiles->overlap_px) + " px")
                             .c_str()
                       : "whole images");
  }

  InferOutcome outcome;
  LoopContext ctx;
  ctx.options = &o;
  ctx.env = &env;
  ctx.model = model.get();
  ctx.data_root = DataRoot(o.data);

  std::unique_ptr<World> world;
  std::unique_ptr<TiledRanks> ranks;
  if (distributed_tiles) {
    TESSERA_ASSIGN_OR_RETURN(Backend backend, BackendForDevice(env.device));
    ConnectOptions co;
    co.backend = backend;
    // Ranks > 0 wait in a broadcast while rank 0 leases, reads and writes, so
    // TESSERA_COLLECTIVE_TIMEOUT_S may only lengthen this wait; the agents stop
    // the survivors of a lost node.
    co.op_timeout =
        std::max<std::chrono::milliseconds>(env.collective_timeout, std::chrono::minutes(15));
    TESSERA_ASSIGN_OR_RETURN(world, ConnectWorld(env, co));
    const torch::Device comm_device =
        backend == Backend::kNccl ? torch::Device(env.device) : torch::Device(torch::kCPU);
    std::vector<int64_t> weights = plan.rank_weights;
    if (std::all_of(weights.begin(), weights.end(), [](int64_t w) { return w <= 0; })) {
      weights.assign(weights.size(), 1);
    }
    ranks = std::make_unique<TiledRanks>(world->world(), *model, *tiles, weights, comm_device);
    if (env.rank != 0) {
      TESSERA_ASSIGN_OR_RETURN(int64_t served, ranks->Serve());
      std::fprintf(stderr, "tessera-worker: rank %d computed %lld tiles of %lld images\n", env.rank,
                   static_cast<long long>(ranks->tiles_computed()), static_cast<long long>(served));
      return outcome;
    }
    ctx.compute = [&ranks](const torch::Tensor& input) { return ranks->Run(input); };
  } else {
    ctx.compute = [&model, &tiles](const torch::Tensor& input) {
      return RunImage(*model, input, tiles);
    };
  }

  std::unique_ptr<ChunkSource> owned_source;
  if (source == nullptr) {
    if (o.local) {
      const int share_world = distributed_tiles ? 1 : env.world_size;
      MemoryChunkQueueOptions qo;
      qo.chunk_size = o.local_chunk_size;
      auto queue = MemoryChunkQueue::Create(
          LocalShare(items, o.local_chunk_size, env.rank, share_world), qo);
      owned_source = queue->ForRank(env.rank);
    } else {
      if (o.controller_url.empty()) {
        return InvalidArgument(
            "no controller: set TESSERA_CONTROLLER_URL, or use --local to process --data "
            "without one",
            "TESSERA_CONTROLLER_URL");
      }
      HttpChunkSourceOptions ho;
      ho.controller_url = o.controller_url;
      ho.token = o.lease_token;
      ho.job_id = env.job_id;
      ho.attempt = env.attempt;
      ho.rank = env.rank;
      TESSERA_ASSIGN_OR_RETURN(owned_source, MakeHttpChunkSource(std::move(ho)));
    }
    source = owned_source.get();
  }

  Status loop = LeaseLoop(ctx, *source, stop_requested, &outcome);
  if (ranks) {
    Status fin = ranks->Finish(/*abort=*/!loop.ok());
    if (loop.ok() && !fin.ok()) loop = fin;
  }
  if (!loop.ok()) return loop;
  std::fprintf(stderr,
               "tessera-worker: rank %d wrote %lld, skipped %lld, failed %lld images in %lld "
               "chunks%s\n",
               env.rank, static_cast<long long>(outcome.written),
               static_cast<long long>(outcome.skipped), static_cast<long long>(outcome.failed),
               static_cast<long long>(outcome.chunks), outcome.stopped ? " (stopped)" : "");
  return outcome;
}

}  // namespace tessera::worker
