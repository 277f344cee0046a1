// Checkpoint files: a tensor file or a manifest whose write, fsync or
// rename fails returns the error naming the file, and a step's old
// manifest stays whole.
#include "worker/runtime/checkpoint.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "common/atomic_file.h"
#include "common/faulty_file_system.h"
#include "tests/worker/runtime/temp_dir_fixture.h"

namespace tessera::worker {
namespace {
namespace fs = std::filesystem;

class CheckpointFilesTest : public testing::TempDirTest {
 protected:
  static Manifest ManifestOf(const std::string& model) {
    Manifest m;
    m.step = 4;
    m.samples_seen = 64;
    m.global_batch = 16;
    m.model = model;
    m.layout = "data_parallel";
    return m;
  }
};

TEST_F(CheckpointFilesTest, ManifestThatCannotBeWrittenSurfacesAndKeepsTheOldOne) {
  fs::create_directories(dir_ / StepDirName(4));
  ASSERT_TRUE(WriteManifestAtomically(dir_.string(), ManifestOf("old")).ok());
  struct Case {
    FileOp op;
    int err;
  };
  for (const Case& c : {Case{FileOp::kSync, EIO}, Case{FileOp::kRename, ENOSPC}}) {
    FaultyFileSystem faulty;
    faulty.FailNext(c.op, "manifest.json", c.err);
    Status written = WriteManifestAtomically(dir_.string(), ManifestOf("new"), &faulty);
    ASSERT_FALSE(written.ok());
    const std::string file = (dir_ / StepDirName(4) / "manifest.json").string();
    EXPECT_EQ(written.message().rfind("cannot write " + file + ": ", 0), 0u) << written.message();
    EXPECT_NE(written.message().find(std::strerror(c.err)), std::string::npos);
    auto kept = ReadManifest(dir_.string(), 4);
    ASSERT_TRUE(kept.ok()) << kept.status().ToString();
    EXPECT_EQ(kept->model, "old");
    for (const auto& e : fs::directory_iterator(dir_ / StepDirName(4))) {
      EXPECT_FALSE(IsTempFileName(e.path().filename().string())) << e.path();
    }
  }
  ASSERT_TRUE(WriteManifestAtomically(dir_.string(), ManifestOf("new")).ok());
  EXPECT_EQ(ReadManifest(dir_.string(), 4)->model, "new");
}

TEST_F(CheckpointFilesTest, TensorFileThatCannotBeWrittenSurfaces) {
  const NamedTensors tensors = {{"layer0.weight", torch::ones({4, 4})}};
  const std::string file = (dir_ / "rank0.tsr").string();
  struct Case {
    FileOp op;
    int err;
    std::string step;
  };
  for (const Case& c :
       {Case{FileOp::kWrite, ENOSPC, "writing "}, Case{FileOp::kSync, EIO, "fsync "}}) {
    FaultyFileSystem faulty;
    faulty.FailNext(c.op, "rank0.tsr", c.err);
    ManifestFile facts;
    Status written = WriteTensorFile(file, tensors, &facts, &faulty);
    ASSERT_FALSE(written.ok());
    EXPECT_EQ(written.message(), c.step + file + ": " + std::strerror(c.err));
    EXPECT_TRUE(facts.sha256.empty()) << "facts of a file that failed";
  }
  ManifestFile facts;
  ASSERT_TRUE(WriteTensorFile(file, tensors, &facts).ok());
  auto read = ReadTensorFile(file);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(torch::equal(read->at("layer0.weight"), torch::ones({4, 4})));
  EXPECT_EQ(facts.size, fs::file_size(file));
}

}  // namespace
}  // namespace tessera::worker
