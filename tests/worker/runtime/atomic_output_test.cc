// Atomic outputs: a crash at any step leaves no partial final file, only a
// recognisable temporary file that RemoveStaleTemps clears.
#include "worker/runtime/atomic_output.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tessera::worker {
namespace {
namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> Names(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

class AtomicOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tessera-atomic-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST_F(AtomicOutputTest, WritesBytesAndLeavesOnlyTheFinalFile) {
  const fs::path out = dir_ / "sub" / "a.png";
  ASSERT_TRUE(WriteFileAtomically(out.string(), "hello").ok());
  EXPECT_EQ(Slurp(out), "hello");
  EXPECT_EQ(Names(out.parent_path()), std::vector<std::string>{"a.png"});
  // Overwriting replaces the content whole.
  ASSERT_TRUE(WriteFileAtomically(out.string(), "bye").ok());
  EXPECT_EQ(Slurp(out), "bye");
}

TEST_F(AtomicOutputTest, TempNamesAreRecognisable) {
  const std::string tmp = TempPathFor((dir_ / "x.png").string());
  const std::string name = fs::path(tmp).filename().string();
  EXPECT_EQ(fs::path(tmp).parent_path(), dir_);
  EXPECT_EQ(name.rfind(".x.png.tmp-", 0), 0u) << name;
  EXPECT_TRUE(IsTempFileName(name));
  EXPECT_NE(TempPathFor((dir_ / "x.png").string()), tmp);  // unique per call
  for (const char* not_temp : {"x.png", ".x.png", "x.png.tmp-1-2", ".x.png.tmp-", ".x.png.tmp-a-1",
                               ".x.png.tmp-12-", ".x.png.tmp--3"}) {
    EXPECT_FALSE(IsTempFileName(not_temp)) << not_temp;
  }
}

// A crash at each step: before the rename no final file exists, a temporary
// file does; after the rename the final file is complete.
TEST_F(AtomicOutputTest, CrashAtEachStepLeavesNoPartialFinalFile) {
  struct Case {
    AtomicWriteStep step;
    bool final_exists;
  };
  const Case cases[] = {{AtomicWriteStep::kAfterWrite, false},
                        {AtomicWriteStep::kAfterSync, false},
                        {AtomicWriteStep::kAfterRename, true}};
  int i = 0;
  for (const Case& c : cases) {
    const fs::path out = dir_ / ("item" + std::to_string(i++) + ".png");
    auto crash = [&c](AtomicWriteStep step, const std::string&) -> Status {
      return step == c.step ? Internal("simulated crash") : Status::Ok();
    };
    const std::string payload(100000, 'z');
    Status s = WriteFileAtomically(out.string(), payload, crash);
    EXPECT_EQ(s.code(), StatusCode::kInternal);
    EXPECT_EQ(fs::exists(out), c.final_exists) << static_cast<int>(c.step);
    if (c.final_exists) {
      EXPECT_EQ(Slurp(out), payload);
    }
    Result<int64_t> removed = RemoveStaleTemps(out.string());
    ASSERT_TRUE(removed.ok());
    EXPECT_EQ(*removed, c.final_exists ? 0 : 1);
    // A retry after the "restart" succeeds and leaves exactly the final file.
    ASSERT_TRUE(WriteFileAtomically(out.string(), payload).ok());
    EXPECT_EQ(Slurp(out), payload);
  }
  std::vector<std::string> expect = {"item0.png", "item1.png", "item2.png"};
  EXPECT_EQ(Names(dir_), expect);
}

TEST_F(AtomicOutputTest, FailedWriterLeavesNothing) {
  const fs::path out = dir_ / "b.png";
  Status s = WriteAtomically(out.string(), [](const std::string& tmp) {
    std::ofstream(tmp) << "half";
    return InvalidArgument("encoder failed");
  });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Names(dir_).empty());
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
  EXPECT_EQ(Names(dir_), expect);
  Result<int64_t> none = RemoveStaleTemps((dir_ / "missing" / "c.png").string());
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0);
}

// Two writers of one item: the other one removed our temporary file.
TEST_F(AtomicOutputTest, VanishedTempIsFineWhenTheOtherWriterFinished) {
  const fs::path out = dir_ / "c.png";
  auto other_won = [&out](AtomicWriteStep step, const std::string& tmp) -> Status {
    if (step == AtomicWriteStep::kAfterSync) {
      fs::remove(tmp);
      std::ofstream(out) << "same";
    }
    return Status::Ok();
  };
  EXPECT_TRUE(WriteFileAtomically(out.string(), "same", other_won).ok());
  EXPECT_EQ(Slurp(out), "same");

  const fs::path lost = dir_ / "d.png";
  auto vanished = [](AtomicWriteStep step, const std::string& tmp) -> Status {
    if (step == AtomicWriteStep::kAfterSync) fs::remove(tmp);
    return Status::Ok();
  };
  EXPECT_EQ(WriteFileAtomically(lost.string(), "x", vanished).code(), StatusCode::kUnavailable);
  EXPECT_FALSE(fs::exists(lost));
}

}  // namespace
}  // namespace tessera::worker
