#include "worker/runtime/manifest.h"

#include <gtest/gtest.h>

#include <map>

namespace tessera::worker {
namespace {

Manifest MakeManifest(int64_t step) {
  Manifest m;
  m.step = step;
  m.global_batch = 16;
  m.samples_seen = step * 16;
  m.model = "tiny-mlp";
  m.layout = "pipeline";
  m.files = {ManifestFile{"layers-0-2.bin", 100, "aa", {"in.fc.weight", "in.fc.bias"}},
             ManifestFile{"layers-2-5.bin", 200, "bb", {"head.fc.weight"}}};
  return m;
}

// A fake disk: (step, path) -> facts.
struct FakeDisk {
  std::map<std::pair<int64_t, std::string>, FileFacts> files;
  void AddComplete(const Manifest& m) {
    for (const auto& f : m.files) files[{m.step, f.path}] = FileFacts{f.size, f.sha256};
  }
  FileProbe Probe() const {
    return [this](int64_t step, const std::string& path, bool) -> std::optional<FileFacts> {
      auto it = files.find({step, path});
      if (it == files.end()) return std::nullopt;
      return it->second;
    };
  }
};

TEST(ManifestTest, JsonRoundTrip) {
  Manifest m = MakeManifest(12);
  auto back = ManifestFromJson(ManifestToJson(m));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, m);
}

TEST(ManifestTest, StepDirNames) {
  EXPECT_EQ(StepDirName(7), "step-7");
  EXPECT_EQ(ParseStepDirName("step-42"), 42);
  EXPECT_FALSE(ParseStepDirName("step-").has_value());
  EXPECT_FALSE(ParseStepDirName("step-4x").has_value());
  EXPECT_FALSE(ParseStepDirName("tmp").has_value());
}

TEST(ManifestTest, RejectsPathsOutsideTheStepDirectory) {
  Manifest m = MakeManifest(1);
  m.files[0].path = "../evil.bin";
  EXPECT_FALSE(ManifestFromJson(ManifestToJson(m)).ok());
}

struct SelectCase {
  const char* name;
  // Mutates the disk / candidates after three complete checkpoints 10, 20, 30.
  std::function<void(FakeDisk&, std::vector<ManifestCandidate>&)> damage;
  std::optional<int64_t> expect_step;
};

class SelectNewestTest : public ::testing::TestWithParam<SelectCase> {};

TEST_P(SelectNewestTest, PicksNewestComplete) {
  FakeDisk disk;
  std::vector<ManifestCandidate> candidates;
  for (int64_t step : {10, 30, 20}) {  // unsorted on purpose
    Manifest m = MakeManifest(step);
    disk.AddComplete(m);
    candidates.push_back({step, ManifestToJson(m)});
  }
  GetParam().damage(disk, candidates);
  Selection sel = SelectNewestComplete(candidates, disk.Probe());
  if (GetParam().expect_step) {
    ASSERT_TRUE(sel.chosen.has_value());
    EXPECT_EQ(sel.chosen->step, *GetParam().expect_step);
  } else {
    EXPECT_FALSE(sel.chosen.has_value());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, SelectNewestTest,
    ::testing::Values(SelectCase{"all_complete", [](FakeDisk&, auto&) {}, 30},
                      SelectCase{"newest_has_no_manifest",
                                 [](FakeDisk&, auto& c) {
                                   c.push_back({40, std::nullopt});
                                 },
                                 30},
                      SelectCase{"newest_file_missing",
                                 [](FakeDisk& d, auto&) {
                                   d.files.erase({30, "layers-2-5.bin"});
                                 },
                                 20},
                      SelectCase{"newest_file_short",
                                 [](FakeDisk& d, auto&) {
                                   d.files[{30, "layers-0-2.bin"}].size = 99;
                                 },
                                 20},
                      SelectCase{"newest_hash_mismatch",
                                 [](FakeDisk& d, auto&) {
                                   d.files[{30, "layers-0-2.bin"}].sha256 = "zz";
                                 },
                                 20},
                      SelectCase{"newest_manifest_garbage",
                                 [](FakeDisk&, auto& c) {
                                   for (auto& x : c) {
                                     if (x.step == 30) x.manifest_json = "{\"format\":";
                                   }
                                 },
                                 20},
                      SelectCase{"manifest_in_wrong_dir",
                                 [](FakeDisk&, auto& c) {
                                   c.push_back({50, ManifestToJson(MakeManifest(10))});
                                 },
                                 30},
                      SelectCase{"tensor_listed_twice",
                                 [](FakeDisk& d, auto& c) {
                                   Manifest m = MakeManifest(60);
                                   m.files[1].tensors.push_back("in.fc.bias");
                                   d.AddComplete(m);
                                   c.push_back({60, ManifestToJson(m)});
                                 },
                                 30},
                      SelectCase{"everything_broken", [](FakeDisk& d, auto&) { d.files.clear(); },
                                 std::nullopt}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ManifestTest, SkippedReasonsAreReported) {
  FakeDisk disk;
  Manifest m = MakeManifest(5);
  disk.AddComplete(m);
  Selection sel = SelectNewestComplete({{5, ManifestToJson(m)}, {6, std::nullopt}}, disk.Probe());
  ASSERT_TRUE(sel.chosen.has_value());
  ASSERT_EQ(sel.skipped.size(), 1u);
  EXPECT_NE(sel.skipped[0].find("step-6"), std::string::npos);
}

TEST(ManifestTest, TensorLocations) {
  auto loc = TensorLocations(MakeManifest(1));
  ASSERT_TRUE(loc.ok());
  EXPECT_EQ(loc->size(), 3u);
  EXPECT_EQ((*loc)[2], (std::pair<std::string, std::string>{"head.fc.weight", "layers-2-5.bin"}));
}

}  // namespace
}  // namespace tessera::worker
