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
  ImageSource(std::shared_ptr<const ImageFolderDataset> ds, uint64_t seed)
      : ds_(std::move(ds)), seed_(seed) {}
  Result<SampleBatch> Load(int64_t first_id, int64_t count) override {
    const int64_t n = ds_->size();
    std::vector<torch::Tensor> inputs, targets;
    int64_t id = first_id;
    while (id < first_id + count) {
      const int64_t epoch = id / n;
      const std::vector<int64_t>& perm = Permutation(epoch);
      std::vector<int64_t> ids;
      while (id < first_id + count && id / n == epoch) ids.push_back(perm[id++ % n]);
      auto batch = ds_->GetBatch(ids, epoch);
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
  std::map<int64_t, std::vector<int64_t>> perms_;
};

}  // namespace

Result<std::unique_ptr<BatchSource>> MakeImageSource(const std::string& dir,
                                                     const std::string& model_name,
                                                     int64_t image_size, uint64_t seed) {
  if (dir.empty()) return InvalidArgument("--data is required for image models", "data");
  TESSERA_ASSIGN_OR_RETURN(DataTask task, TaskFor(model_name));
  DatasetOptions o;
  o.task = task;
  o.image_size = image_size;
  o.seed = seed;
  auto ds = ImageFolderDataset::Open(dir, o);
  if (!ds.ok()) {
    const Status& s = ds.status();
    return Status(StatusCode::kInvalidArgument, s.message(), "data");
  }
  return std::unique_ptr<BatchSource>(std::make_unique<ImageSource>(*ds, seed));
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
