// Fixtures shared by the inference tests: temporary folders
// (temp_dir_fixture.h), generated images, checkpoints of freshly initialised
// reference models (with non-trivial batch-norm statistics), and file
// comparison helpers.
#ifndef TESSERA_TESTS_WORKER_RUNTIME_INFER_TEST_UTIL_H_
#define TESSERA_TESTS_WORKER_RUNTIME_INFER_TEST_UTIL_H_

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "tests/worker/runtime/temp_dir_fixture.h"
#include "worker/data/image.h"
#include "worker/data/sample_images.h"
#include "worker/model/gan.h"
#include "worker/model/layered_model.h"
#include "worker/runtime/checkpoint.h"
#include "worker/runtime/collectives.h"

namespace tessera::worker::testing {

namespace fs = std::filesystem;

// Every regular file under `dir`, relative path -> bytes.
inline std::map<std::string, std::string> FilesUnder(const fs::path& dir) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) {
      out[e.path().lexically_relative(dir).generic_string()] = Slurp(e.path());
    }
  }
  return out;
}

// A deterministic RGB image of any size: a sample pattern tiled / cropped.
inline Image TestImage(int64_t width, int64_t height, int pattern, uint64_t seed) {
  const int64_t side = std::max<int64_t>(8, std::max(width, height));
  const Image square = GenerateSampleImage(pattern, side, seed);
  Image out = MakeImage(width, height, 3);
  for (int64_t y = 0; y < height; ++y) {
    for (int64_t x = 0; x < width; ++x) {
      for (int64_t c = 0; c < 3; ++c) out.at(y, x, c) = square.at(y, x, c);
    }
  }
  return out;
}

// Fresh model with batch-norm running statistics set to non-trivial values
// (seeded), so eval-mode normalisation is not the identity.
inline void RandomizeBatchNormStats(LayeredModel& net, uint64_t seed) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(seed);
  for (auto& [name, t] : net.NamedBuffers(0, net.num_layers())) {
    if (name.ends_with("running_mean")) t.copy_(torch::randn(t.sizes()) * 0.1);
    if (name.ends_with("running_var")) t.copy_(torch::rand(t.sizes()) * 1.5 + 0.5);
  }
}

struct BuiltNet {
  std::shared_ptr<LayeredModel> net;  // what inference runs
  NamedTensors checkpoint_tensors;    // everything a training checkpoint would hold
};

inline Result<BuiltNet> BuildTestNet(const std::string& model, int64_t width, uint64_t seed) {
  ModelConfig mc;
  mc.width = width;
  mc.seed = seed;
  mc.num_classes = static_cast<int64_t>(SamplePatternNames().size());
  BuiltNet out;
  std::vector<std::shared_ptr<LayeredModel>> all;
  if (model == "gan-pix2pix") {
    TESSERA_ASSIGN_OR_RETURN(Gan gan, MakeGan(model, mc));
    out.net = gan.generator;
    all = {gan.generator, gan.discriminator};
  } else {
    TESSERA_ASSIGN_OR_RETURN(out.net, MakeModel(model, mc));
    all = {out.net};
  }
  for (auto& m : all) {
    RandomizeBatchNormStats(*m, seed + 17);
    for (auto& p : m->NamedParameters(0, m->num_layers())) out.checkpoint_tensors.push_back(p);
    for (auto& b : m->NamedBuffers(0, m->num_layers())) out.checkpoint_tensors.push_back(b);
  }
  return out;
}

// Writes a one-file checkpoint (step `step`) of the net into `dir`, through
// the same SaveCheckpoint protocol training uses.
inline Status WriteTestCheckpoint(const std::string& dir, const std::string& model,
                                  const BuiltNet& built, int64_t step = 5) {
  auto world = MakeLocalWorld();
  CheckpointContent c;
  c.step = step;
  c.samples_seen = step * 4;
  c.global_batch = 4;
  c.model = model;
  c.layout = "data";
  c.file_name = "layers-all.bin";
  c.tensors = built.checkpoint_tensors;
  return SaveCheckpoint(world->world(), dir, c);
}

}  // namespace tessera::worker::testing

#endif  // TESSERA_TESTS_WORKER_RUNTIME_INFER_TEST_UTIL_H_
