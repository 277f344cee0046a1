// Stale temporary files: what a crashed atomic write leaves, RemoveStaleTemps
// clears, for that item only. (The atomic write itself: tests/common.)
#include "worker/runtime/atomic_output.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/common/atomic_crash.h"
#include "tests/worker/runtime/temp_dir_fixture.h"

namespace tessera::worker {
namespace {
namespace fs = std::filesystem;
using testing::FilesIn;
using testing::Slurp;

class AtomicOutputTest : public testing::TempDirTest {};

// A crash at each step of an atomic write (common/atomic_file.h): before the
// rename no final file exists and RemoveStaleTemps clears the temporary
// file; after it the final file is complete and nothing is left to clear.
TEST_F(AtomicOutputTest, RemoveStaleTempsClearsWhatACrashLeft) {
  int i = 0;
  for (const tessera::testing::AtomicCrash& c : tessera::testing::kAtomicCrashes) {
    const fs::path out = dir_ / ("item" + std::to_string(i++) + ".png");
    const AtomicWriteOptions crash = tessera::testing::CrashAt(c.step);
    const std::string payload(100000, 'z');
    Status s = WriteFileAtomically(*FileSystem::Default(), out, payload, crash);
    EXPECT_EQ(s.code(), StatusCode::kInternal);
    EXPECT_EQ(fs::exists(out), c.final_exists) << static_cast<int>(c.step);
    Result<int64_t> removed = RemoveStaleTemps(out.string());
    ASSERT_TRUE(removed.ok());
    EXPECT_EQ(*removed, c.final_exists ? 0 : 1);
    // A retry after the "restart" succeeds and leaves exactly the final file.
    ASSERT_TRUE(WriteFileAtomically(*FileSystem::Default(), out, payload).ok());
    EXPECT_EQ(Slurp(out), payload);
  }
  std::vector<std::string> expect = {"item0.png", "item1.png", "item2.png"};
  EXPECT_EQ(FilesIn(dir_), expect);
}

TEST_F(AtomicOutputTest, RemoveStaleTempsTouchesOnlyThatItem) {
  for (const char* name : {"a.png", ".a.png.tmp-1-2", ".a.png.tmp-99-0", ".b.png.tmp-1-2",
                           ".a.png.tmp-1-2.tmp-3-4", "a.png.error.txt"}) {
    std::ofstream(dir_ / name) << "x";
  }
  Result<int64_t> removed = RemoveStaleTemps((dir_ / "a.png").string());
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 2);
  std::vector<std::string> expect = {".a.png.tmp-1-2.tmp-3-4", ".b.png.tmp-1-2", "a.png",
                                     "a.png.error.txt"};
  EXPECT_EQ(FilesIn(dir_), expect);
  Result<int64_t> none = RemoveStaleTemps((dir_ / "missing" / "c.png").string());
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0);
}

}  // namespace
}  // namespace tessera::worker
