// Staged outputs: a chunk's outputs become final together; a crash at each
// point of the commit leaves only complete final files and recognisable
// temporary files; outputs another writer took are reported, not lost
// silently.
#include "worker/runtime/staged_outputs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/faulty_file_system.h"
#include "tests/worker/runtime/temp_dir_fixture.h"

namespace tessera::worker {
namespace {
namespace fs = std::filesystem;
using testing::FilesIn;
using testing::Slurp;

std::function<Status(const std::string&)> Writes(const std::string& bytes) {
  return [bytes](const std::string& tmp) -> Status {
    std::ofstream out(tmp, std::ios::binary);
    out << bytes;
    out.close();
    return out ? Status::Ok() : Internal("writing " + tmp);
  };
}

class StagedOutputsTest : public testing::TempDirTest {};

// Nothing is final before Commit; after it every output is, in its folder
// (created on the way), and no temporary file is left. Stage is called from
// several threads at once, as the encode threads do.
TEST_F(StagedOutputsTest, NothingFinalBeforeCommitEverythingAfter) {
  StagedOutputs staged;
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        const std::string name =
            "box" + std::to_string(t % 2) + "/img-" + std::to_string(t * 5 + i) + ".png";
        EXPECT_TRUE(staged.Stage((dir_ / name).string(), Writes(name)).ok());
      }
    });
  }
  for (auto& w : writers) w.join();
  EXPECT_EQ(staged.size(), 20u);
  for (const std::string& f : FilesIn(dir_)) {
    EXPECT_TRUE(IsTempFileName(fs::path(f).filename().string())) << f << " final before Commit";
  }
  auto committed = staged.Commit();
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_EQ(committed->written, 20);
  EXPECT_TRUE(committed->lost.empty());
  EXPECT_EQ(staged.size(), 0u);
  const std::vector<std::string> files = FilesIn(dir_);
  ASSERT_EQ(files.size(), 20u);
  for (const std::string& f : files) EXPECT_EQ(Slurp(dir_ / f), f);
}

// A crash at each point of the commit: the outputs already renamed are
// complete, the others are temporary files that RemoveStaleTempsOf clears.
TEST_F(StagedOutputsTest, CrashDuringCommitLeavesCompleteFinalsAndTemps) {
  struct Case {
    AtomicWriteStep step;
    int at;               // the crash comes at this output's step (0-based)
    int finals_expected;  // outputs at their final paths afterwards
  };
  const Case cases[] = {{AtomicWriteStep::kAfterWrite, 1, 0},
                        {AtomicWriteStep::kAfterSync, 0, 0},
                        {AtomicWriteStep::kAfterSync, 2, 2},
                        {AtomicWriteStep::kAfterRename, 1, 2}};
  int n = 0;
  for (const Case& c : cases) {
    const fs::path dir = dir_ / ("case" + std::to_string(n++));
    int seen = 0;
    StagedOutputs staged([&](AtomicWriteStep step, const std::string&) -> Status {
      if (step == c.step && seen++ == c.at) return Internal("simulated kill -9");
      return Status::Ok();
    });
    std::vector<std::string> paths;
    Status s;
    for (int i = 0; i < 3 && s.ok(); ++i) {
      paths.push_back((dir / ("o" + std::to_string(i) + ".png")).string());
      s = staged.Stage(paths.back(), Writes(std::string(5000, static_cast<char>('a' + i))));
    }
    if (s.ok()) s = staged.Commit().status();
    EXPECT_EQ(s.code(), StatusCode::kInternal) << n;
    int finals = 0;
    for (size_t i = 0; i < paths.size(); ++i) {
      if (!fs::exists(paths[i])) continue;
      ++finals;
      EXPECT_EQ(Slurp(paths[i]), std::string(5000, static_cast<char>('a' + i))) << paths[i];
    }
    EXPECT_EQ(finals, c.finals_expected) << n;
    auto removed = RemoveStaleTempsOf(paths);
    ASSERT_TRUE(removed.ok());
    EXPECT_EQ(static_cast<int>(FilesIn(dir).size()), finals) << n << ": temporary files left";
  }
}

// A commit whose fsync or rename fails returns the error naming the path
// (the chunk is then not reported done): nothing is final before the fsync
// round ends, an output whose rename failed leaves no temporary file, and
// what is left RemoveStaleTempsOf clears.
TEST_F(StagedOutputsTest, FailedFsyncOrRenameAtCommitIsReturned) {
  struct Case {
    FileOp op;
    std::string part;
    int err;
    std::string step;  // the message starts so
    int finals_expected;
  };
  int n = 0;
  const Case cases[] = {{FileOp::kSync, "o1.png", EIO, "fsync ", 0},
                        {FileOp::kRename, "o1.png", EXDEV, "renaming ", 1},
                        {FileOp::kSyncDir, "case2", EIO, "fsync ", 3}};
  for (const Case& c : cases) {
    const fs::path dir = dir_ / ("case" + std::to_string(n++));
    FaultyFileSystem faulty;
    faulty.FailNext(c.op, c.part, c.err);
    StagedOutputs staged({}, &faulty);
    std::vector<std::string> paths;
    for (int i = 0; i < 3; ++i) {
      paths.push_back((dir / ("o" + std::to_string(i) + ".png")).string());
      ASSERT_TRUE(staged.Stage(paths.back(), Writes("x" + std::to_string(i))).ok());
    }
    auto committed = staged.Commit();
    ASSERT_FALSE(committed.ok()) << c.step;
    EXPECT_EQ(faulty.fired(), 1);
    EXPECT_EQ(committed.status().code(), StatusCode::kInternal);
    EXPECT_EQ(committed.status().message().rfind(c.step, 0), 0u) << committed.status().message();
    EXPECT_NE(committed.status().message().find(c.part), std::string::npos);
    EXPECT_NE(committed.status().message().find(std::strerror(c.err)), std::string::npos);
    int finals = 0;
    for (const std::string& p : paths) finals += fs::exists(p);
    EXPECT_EQ(finals, c.finals_expected) << c.step;
    ASSERT_TRUE(RemoveStaleTempsOf(paths).ok());
    EXPECT_EQ(static_cast<int>(FilesIn(dir).size()), finals) << c.step;
  }
}

// Another writer of the same item (an overlapping lease) removed our
// temporary file: fine when its final file exists, reported lost otherwise.
TEST_F(StagedOutputsTest, VanishedTemporaryFilesCountOrAreReportedLost) {
  const std::string won = (dir_ / "won.png").string(), lost = (dir_ / "lost.png").string();
  StagedOutputs staged;
  ASSERT_TRUE(staged.Stage(won, Writes("mine")).ok());
  ASSERT_TRUE(staged.Stage(lost, Writes("mine too")).ok());
  ASSERT_TRUE(RemoveStaleTempsOf({won, lost}).ok());  // the other writer's clean-up
  std::ofstream(won) << "theirs";                     // and its finished output
  auto committed = staged.Commit();
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_EQ(committed->written, 1);
  EXPECT_EQ(committed->lost, std::vector<std::string>{lost});
  EXPECT_EQ(FilesIn(dir_), std::vector<std::string>{"won.png"});
}

// RemoveStaleTempsOf lists each folder once and removes only the temporary
// files of the given outputs.
TEST_F(StagedOutputsTest, RemoveStaleTempsOfTouchesOnlyTheGivenOutputs) {
  fs::create_directories(dir_ / "a");
  fs::create_directories(dir_ / "b");
  for (const char* name : {"a/x.png", "a/.x.png.tmp-1-2", "a/.y.png.tmp-3-4", "a/.z.png.tmp-5-6",
                           "b/.x.png.tmp-7-8", "b/.x.png.tmp-1-2.tmp-3-4"}) {
    std::ofstream(dir_ / name) << "x";
  }
  auto removed = RemoveStaleTempsOf(
      {(dir_ / "a/x.png").string(), (dir_ / "a/y.png").string(), (dir_ / "b/x.png").string()});
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 3);
  const std::vector<std::string> expect = {"a/.z.png.tmp-5-6", "a/x.png",
                                           "b/.x.png.tmp-1-2.tmp-3-4"};
  EXPECT_EQ(FilesIn(dir_), expect);
}

}  // namespace
}  // namespace tessera::worker
