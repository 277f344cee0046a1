// WriteFileAtomically on a real folder: the content is replaced whole, a
// failure at any step keeps the old content and leaves no temporary file,
// errors name the path, and a crash at each step leaves no partial file.
#include "common/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "common/faulty_file_system.h"
#include "tests/common/atomic_crash.h"
#include "tests/common/real_file_system_fixture.h"

namespace tessera {
namespace {
namespace fs = std::filesystem;
using testing::Slurp;

class AtomicFileTest : public testing::RealFileSystemTest {};

TEST_F(AtomicFileTest, ReplacesTheContentAndLeavesOnlyTheFinalFile) {
  const fs::path out = dir_.path() / "state.json";
  ASSERT_TRUE(WriteFileAtomically(files(), out, "first").ok());
  EXPECT_EQ(Slurp(out), "first");
  ASSERT_TRUE(WriteFileAtomically(files(), out, "second, longer").ok());
  EXPECT_EQ(Slurp(out), "second, longer");
  ASSERT_TRUE(WriteFileAtomically(files(), out, "3").ok());
  EXPECT_EQ(Slurp(out), "3");
  EXPECT_EQ(dir_.Names(), std::vector<std::string>{"state.json"});
}

TEST_F(AtomicFileTest, ModeAndParentFolders) {
  const fs::path out = dir_.path() / "a" / "b" / "secret";
  EXPECT_EQ(WriteFileAtomically(files(), out, "x").code(), StatusCode::kNotFound);
  AtomicWriteOptions o;
  o.create_parent_dirs = true;
  o.mode = 0600;
  o.ignore_umask = true;
  ASSERT_TRUE(WriteFileAtomically(files(), out, "x", o).ok());
  EXPECT_EQ(fs::status(out).permissions(), fs::perms(0600));
}

// A real rename that fails (the final name is a non-empty folder): the error
// names the path and the temporary file is gone.
TEST_F(AtomicFileTest, FailedRenameRemovesTheTemporaryFile) {
  const fs::path out = dir_.path() / "taken";
  fs::create_directories(out / "inside");
  Status s = WriteFileAtomically(files(), out, "x");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message().rfind("cannot write " + out.string() + ": renaming ", 0), 0u)
      << s.message();
  EXPECT_EQ(dir_.Names(), std::vector<std::string>{"taken"});
}

// An injected failure at each step: the caller gets it (naming the path and
// the errno), the old content stays (or, after the rename, the new one is
// there but not known durable), and no temporary file is left.
TEST_F(AtomicFileTest, EveryFailedStepSurfacesAndCleansUp) {
  struct Case {
    FileOp op;
    std::string path_part;  // "state.json" matches the temporary file too
    int err;
    std::string step;  // in the message, after "cannot write <path>: "
    std::string content_after;
  };
  const fs::path out = dir_.path() / "state.json";
  const Case cases[] = {
      {FileOp::kWrite, "state.json", ENOSPC, "writing ", "old"},
      {FileOp::kSync, "state.json", EIO, "fsync ", "old"},
      {FileOp::kRename, "state.json", EXDEV, "renaming ", "old"},
      // After the rename: the new content is there, but not known durable.
      {FileOp::kSyncDir, "", EIO, "fsync " + dir_.path().string(), "new"},
      {FileOp::kRemove, "", EIO, "", "new"},  // not called: the fault stays armed
  };
  for (const Case& c : cases) {
    std::ofstream(out, std::ios::trunc) << "old";
    FaultyFileSystem faulty;
    faulty.FailNext(c.op, c.path_part, c.err);
    Status s = WriteFileAtomically(faulty, out, "new");
    if (c.step.empty()) {
      EXPECT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(faulty.pending(), 1u);
    } else {
      ASSERT_FALSE(s.ok()) << c.step;
      EXPECT_EQ(s.code(), StatusCode::kInternal);
      const std::string prefix = "cannot write " + out.string() + ": " + c.step;
      EXPECT_EQ(s.message().rfind(prefix, 0), 0u) << s.message();
      EXPECT_NE(s.message().find(std::strerror(c.err)), std::string::npos) << s.message();
      EXPECT_EQ(faulty.fired(), 1);
    }
    EXPECT_EQ(Slurp(out), c.content_after) << c.step;
    EXPECT_EQ(dir_.Names(), std::vector<std::string>{"state.json"}) << c.step;
  }
}

TEST_F(AtomicFileTest, TempNamesAreRecognisable) {
  const std::string tmp = TempPathFor(dir_.path() / "x.png");
  const std::string name = fs::path(tmp).filename().string();
  EXPECT_EQ(fs::path(tmp).parent_path(), dir_.path());
  EXPECT_EQ(name.rfind(".x.png.tmp-", 0), 0u) << name;
  EXPECT_TRUE(IsTempFileName(name));
  EXPECT_NE(TempPathFor(dir_.path() / "x.png"), tmp);  // unique per call
  for (const char* not_temp : {"x.png", ".x.png", "x.png.tmp-1-2", ".x.png.tmp-", ".x.png.tmp-a-1",
                               ".x.png.tmp-12-", ".x.png.tmp--3"}) {
    EXPECT_FALSE(IsTempFileName(not_temp)) << not_temp;
  }
}

// A crash at each step: before the rename no final file exists, a temporary
// file does; after the rename the final file is complete.
TEST_F(AtomicFileTest, CrashAtEachStepLeavesNoPartialFinalFile) {
  int i = 0;
  for (const testing::AtomicCrash& c : testing::kAtomicCrashes) {
    const fs::path out = dir_.path() / ("item" + std::to_string(i++) + ".png");
    const AtomicWriteOptions crash = testing::CrashAt(c.step);
    const std::string payload(100000, 'z');
    Status s = WriteFileAtomically(files(), out, payload, crash);
    EXPECT_EQ(s.code(), StatusCode::kInternal);
    EXPECT_EQ(fs::exists(out), c.final_exists) << static_cast<int>(c.step);
    if (c.final_exists) {
      EXPECT_EQ(Slurp(out), payload);
    }
    int temps = 0;
    for (const std::string& name : dir_.Names()) temps += IsTempFileName(name);
    EXPECT_EQ(temps, c.final_exists ? 0 : 1);
    for (const std::string& name : dir_.Names()) {
      if (IsTempFileName(name)) fs::remove(dir_.path() / name);
    }
  }
  std::vector<std::string> expect = {"item2.png"};
  EXPECT_EQ(dir_.Names(), expect);
}

// Two writers of one item: the other one removed our temporary file.
TEST_F(AtomicFileTest, VanishedTempIsFineForASharedWriterWhenTheOtherFinished) {
  const fs::path out = dir_.path() / "c.png";
  AtomicWriteOptions other_won;
  other_won.shared_writer = true;
  other_won.faults = [&out](AtomicWriteStep step, const std::string& tmp) -> Status {
    if (step == AtomicWriteStep::kAfterSync) {
      fs::remove(tmp);
      std::ofstream(out) << "same";
    }
    return Status::Ok();
  };
  EXPECT_TRUE(WriteFileAtomically(files(), out, "same", other_won).ok());
  EXPECT_EQ(Slurp(out), "same");

  const fs::path lost = dir_.path() / "d.png";
  AtomicWriteOptions vanished;
  vanished.shared_writer = true;
  vanished.faults = [](AtomicWriteStep step, const std::string& tmp) -> Status {
    if (step == AtomicWriteStep::kAfterSync) fs::remove(tmp);
    return Status::Ok();
  };
  EXPECT_EQ(WriteFileAtomically(files(), lost, "x", vanished).code(), StatusCode::kUnavailable);
  EXPECT_FALSE(fs::exists(lost));
  // Without shared_writer a vanished temporary file is an error like any other.
  vanished.shared_writer = false;
  EXPECT_EQ(WriteFileAtomically(files(), lost, "x", vanished).code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tessera
