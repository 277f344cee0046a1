#include "worker/runtime/image_source.h"

#include <map>

#include "worker/data/image_folder_dataset.h"
#include "worker/data/sample_images.h"
#include "worker/data/sharding.h"

namespace tessera::worker {
namespace {

Result<DataTask> TaskFor(const std::string& model_name) {
  if (model_name == "colorize-unet") return DataTask::kColorize;
  if (model_name == "denoiser-dncnn") return DataTask::kDenoise;
  if (model_name == "classifier-resnet") return DataTask::kClassify;
  if (model_name == "gan-pix2pix") return DataTask::kGan;
  return InvalidArgument("model \"" + model_name + "\" has no image training task", "model");
}

class ImageSource : public BatchSource {
 public:
  ImageSource(std::shared_ptr<const ImageFolderDataset> ds, uint64_t seed, int threads)
      : ds_(std::move(ds)), seed_(seed), threads_(threads) {}
  Result<SampleBatch> Load(int64_t first_id, int64_t count) override {
    const int64_t n = ds_->size();
    std::vector<torch::Tensor> inputs, targets;
    int64_t id = first_id;
    while (id < first_id + count) {
      const int64_t epoch = id / n;
      const std::vector<int64_t>& perm = Permutation(epoch);
      std::vector<int64_t> ids;
      while (id < first_id + count && id / n == epoch) ids.push_back(perm[id++ % n]);
      auto batch = ds_->GetBatch(ids, epoch, threads_);
      if (!batch.ok()) return batch.status();
      inputs.push_back(batch->input);
      targets.push_back(batch->target);
    }
    SampleBatch b;
    b.input = torch::cat(inputs);
    b.target = torch::cat(targets);
    return b;
  }

 private:
  const std::vector<int64_t>& Permutation(int64_t epoch) {
    auto it = perms_.find(epoch);
    if (it == perms_.end()) {
      if (perms_.size() > 4) perms_.clear();
      it = perms_.emplace(epoch, EpochPermutation(seed_, epoch, ds_->size())).first;
    }
    return it->second;
  }
  std::shared_ptr<const ImageFolderDataset> ds_;
  uint64_t seed_;
  int threads_;
  std::map<int64_t, std::vector<int64_t>> perms_;
};

// Image values moved from [from_lo, from_hi] to the convention's range; labels
// (classification targets) stay as they are.
class RangeMappedSource : public BatchSource {
 public:
  RangeMappedSource(std::unique_ptr<BatchSource> inner, std::pair<double, double> from,
                    std::pair<double, double> to, bool map_target)
      : inner_(std::move(inner)), from_(from), to_(to), map_target_(map_target) {}
  Result<SampleBatch> Load(int64_t first_id, int64_t count) override {
    TESSERA_ASSIGN_OR_RETURN(SampleBatch b, inner_->Load(first_id, count));
    if (from_ == to_) return b;
    const double scale = (to_.second - to_.first) / (from_.second - from_.first);
    b.input = (b.input - from_.first) * scale + to_.first;
    if (map_target_) b.target = (b.target - from_.first) * scale + to_.first;
    return b;
  }

 private:
  std::unique_ptr<BatchSource> inner_;
  std::pair<double, double> from_, to_;
  bool map_target_;
};

Result<std::unique_ptr<BatchSource>> OpenSource(const std::string& dir, const DatasetOptions& o,
                                                uint64_t seed, int threads) {
  if (dir.empty()) return InvalidArgument("--data is required for image models", "data");
  auto ds = ImageFolderDataset::Open(dir, o);
  if (!ds.ok()) {
    const Status& s = ds.status();
    return Status(StatusCode::kInvalidArgument, s.message(), "data");
  }
  return std::unique_ptr<BatchSource>(std::make_unique<ImageSource>(*ds, seed, threads));
}

}  // namespace

Result<std::unique_ptr<BatchSource>> MakeConventionSource(const std::string& dir,
                                                          const api::ImageConvention& c,
                                                          int64_t image_size, uint64_t seed,
                                                          int loader_threads) {
  DatasetOptions o;
  o.image_size = image_size;
  o.seed = seed;
  std::pair<double, double> from{0.0, 1.0};
  bool map_target = true;
  if (c.input == "l" && c.output == "ab") {
    o.task = DataTask::kColorize;
  } else if (c.input == "gray" && c.output == "rgb") {
    o.task = DataTask::kGan;
    from = {-1.0, 1.0};
  } else if ((c.input == "rgb" && c.output == "rgb") || (c.input == "gray" && c.output == "gray")) {
    o.task = DataTask::kDenoise;
    o.channels = c.input == "rgb" ? 3 : 1;
  } else if ((c.input == "rgb" || c.input == "gray") && c.output == "scores") {
    o.task = DataTask::kClassify;
    o.channels = c.input == "rgb" ? 3 : 1;
    map_target = false;
  } else {
    return InvalidArgument("Tessera trains " + c.input + " -> " + c.output +
                               " on no task (l -> ab, gray -> rgb, rgb -> rgb, gray -> gray, "
                               "rgb|gray -> scores)",
                           "image.output");
  }
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<BatchSource> source,
                           OpenSource(dir, o, seed, loader_threads));
  if (o.task == DataTask::kColorize) return source;  // L and ab have their own scales
  return std::unique_ptr<BatchSource>(std::make_unique<RangeMappedSource>(
      std::move(source), from, c.range.value_or(std::make_pair(0.0, 1.0)), map_target));
}

std::vector<int64_t> ConventionInputShape(const api::ImageConvention& c, int64_t image_size) {
  return {c.input == "rgb" ? 3 : 1, image_size, image_size};
}

Result<std::unique_ptr<BatchSource>> MakeImageSource(const std::string& dir,
                                                     const std::string& model_name,
                                                     int64_t image_size, uint64_t seed,
                                                     int loader_threads) {
  if (dir.empty()) return InvalidArgument("--data is required for image models", "data");
  TESSERA_ASSIGN_OR_RETURN(DataTask task, TaskFor(model_name));
  DatasetOptions o;
  o.task = task;
  o.image_size = image_size;
  o.seed = seed;
  return OpenSource(dir, o, seed, loader_threads);
}

Result<std::vector<int64_t>> ModelInputShape(const std::string& model_name, int64_t image_size) {
  TESSERA_ASSIGN_OR_RETURN(DataTask task, TaskFor(model_name));
  const int64_t c = task == DataTask::kColorize || task == DataTask::kGan ? 1 : 3;
  return std::vector<int64_t>{c, image_size, image_size};
}

int64_t SampleImageClasses() { return static_cast<int64_t>(SamplePatternNames().size()); }

Status WriteSampleImages(const std::string& dir, int64_t count, int64_t size, uint64_t seed) {
  auto r = GenerateSampleImages(dir, count, size, seed);
  return r.ok() ? Status::Ok() : r.status();
}

}  // namespace tessera::worker
