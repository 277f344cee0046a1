// FaultyFileSystem: an armed fault fires once, on the first call of its kind
// whose path matches, with the real call's Status; everything else passes.
#include "common/faulty_file_system.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>

#include "tests/common/temp_dir.h"

namespace tessera {
namespace {
namespace fs = std::filesystem;
using testing::Slurp;
using testing::TempDir;

class FaultyFileSystemTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = dir_.path() / "a.txt";
    b_ = dir_.path() / "b.txt";
    std::ofstream(a_) << "A";
    std::ofstream(b_) << "B";
  }
  TempDir dir_;
  fs::path a_, b_;
  FaultyFileSystem faulty_;
};

// Each kind of call, failed once on one path: the same call on another path
// passes, and so does the second call on that path.
TEST_F(FaultyFileSystemTest, EachOpFailsOnceOnTheMatchingPath) {
  const fs::path sub1 = dir_.path() / "sub1", sub2 = dir_.path() / "sub2";
  fs::create_directories(sub1);
  fs::create_directories(sub2);
  WriteFileOptions synced;
  synced.sync = true;
  struct Case {
    FileOp op;
    std::string part;
    fs::path target, other;
    std::function<Status(const fs::path&)> call;
    std::string message_start;
  };
  const Case cases[] = {
      {FileOp::kRead, "a.txt", a_, b_,
       [&](const fs::path& p) { return faulty_.ReadFile(p).status(); }, "reading "},
      {FileOp::kWrite, "a.txt", a_, b_,
       [&](const fs::path& p) { return faulty_.WriteFile(p, "w", {}); }, "writing "},
      {FileOp::kSync, "a.txt", a_, b_, [&](const fs::path& p) { return faulty_.SyncFile(p); },
       "fsync "},
      {FileOp::kSync, "a.txt", a_, b_,
       [&](const fs::path& p) { return faulty_.WriteFile(p, "s", synced); }, "fsync "},
      {FileOp::kSyncDir, "sub1", sub1, sub2, [&](const fs::path& p) { return faulty_.SyncDir(p); },
       "fsync "},
      {FileOp::kRename, "a.txt", a_, b_, [&](const fs::path& p) { return faulty_.Rename(p, p); },
       "renaming "},
      {FileOp::kCreateDirs, "sub1", sub1, sub2,
       [&](const fs::path& p) { return faulty_.CreateDirs(p); }, "creating the folder "},
  };
  for (const Case& c : cases) {
    faulty_.FailNext(c.op, c.part, EIO);
    EXPECT_TRUE(c.call(c.other).ok()) << c.message_start << "on another path";
    Status failed = c.call(c.target);
    EXPECT_EQ(failed.code(), StatusCode::kInternal) << c.message_start;
    EXPECT_EQ(failed.message().rfind(c.message_start + c.target.string(), 0), 0u)
        << failed.message();
    EXPECT_NE(failed.message().find(std::strerror(EIO)), std::string::npos) << failed.message();
    EXPECT_TRUE(c.call(c.target).ok()) << c.message_start << "fired twice";
    EXPECT_EQ(faulty_.pending(), 0u);
  }
  EXPECT_EQ(faulty_.fired(), 7);
}

TEST_F(FaultyFileSystemTest, FailedWritesLeaveWhatARealFailureLeaves) {
  faulty_.FailNext(FileOp::kWrite, "a.txt", ENOSPC);
  EXPECT_EQ(faulty_.WriteFile(a_, "new", {}).code(), StatusCode::kInternal);
  EXPECT_EQ(Slurp(a_), "");  // created (truncated), nothing written
  WriteFileOptions synced;
  synced.sync = true;
  faulty_.FailNext(FileOp::kSync, "b.txt", EIO);
  EXPECT_EQ(faulty_.WriteFile(b_, "new", synced).code(), StatusCode::kInternal);
  EXPECT_EQ(Slurp(b_), "new");  // written, not known durable
  faulty_.FailNext(FileOp::kRename, "a.txt", EXDEV);
  EXPECT_FALSE(faulty_.Rename(b_, a_).ok());
  EXPECT_EQ(Slurp(b_), "new");  // nothing moved
  faulty_.FailNext(FileOp::kRemove, "b.txt", EACCES);
  EXPECT_FALSE(faulty_.Remove(b_).ok());
  EXPECT_TRUE(fs::exists(b_));
}

TEST_F(FaultyFileSystemTest, FaultsFireInTheOrderArmed) {
  faulty_.FailNext(FileOp::kRead, "", ENOENT);
  faulty_.FailNext(FileOp::kRead, "", EACCES);
  EXPECT_EQ(faulty_.ReadFile(a_).status().code(), StatusCode::kNotFound);
  Status second = faulty_.ReadFile(a_).status();
  EXPECT_EQ(second.code(), StatusCode::kInternal);
  EXPECT_NE(second.message().find(std::strerror(EACCES)), std::string::npos);
  Result<std::string> third = faulty_.ReadFile(a_);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(*third, "A");
}

}  // namespace
}  // namespace tessera
