// The real FileSystem on a real temporary folder: what each call does, and
// that every error names the path.
#include "common/file_system.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>

#include "tests/common/real_file_system_fixture.h"

namespace tessera {
namespace {
namespace fs = std::filesystem;
using testing::Slurp;

class FileSystemTest : public testing::RealFileSystemTest {};

TEST_F(FileSystemTest, WriteThenReadGivesTheBytesBack) {
  const fs::path file = dir_.path() / "a.bin";
  const std::string bytes("one\0two\nthree", 13);
  ASSERT_TRUE(files().WriteFile(file, bytes, {}).ok());
  Result<std::string> read = files().ReadFile(file);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, bytes);
  // A second write truncates.
  WriteFileOptions synced;
  synced.sync = true;
  ASSERT_TRUE(files().WriteFile(file, "x", synced).ok());
  EXPECT_EQ(Slurp(file), "x");
}

TEST_F(FileSystemTest, ReadsFilesWhoseSizeIsUnknown) {
  // /proc files report size 0: the read goes to the end, not to st_size.
  Result<std::string> stat = files().ReadFile("/proc/self/stat");
  ASSERT_TRUE(stat.ok()) << stat.status().ToString();
  EXPECT_NE(stat->find(')'), std::string::npos);
}

TEST_F(FileSystemTest, ModeFollowsTheUmaskUnlessToldOtherwise) {
  const mode_t old = ::umask(027);
  WriteFileOptions o;
  o.mode = 0666;
  ASSERT_TRUE(files().WriteFile(dir_.path() / "masked", "x", o).ok());
  o.ignore_umask = true;
  ASSERT_TRUE(files().WriteFile(dir_.path() / "exact", "x", o).ok());
  ::umask(old);
  EXPECT_EQ(fs::status(dir_.path() / "masked").permissions(), fs::perms(0640));
  EXPECT_EQ(fs::status(dir_.path() / "exact").permissions(), fs::perms(0666));
}

TEST_F(FileSystemTest, RenameReplacesAndRemoveDeletes) {
  const fs::path a = dir_.path() / "a", b = dir_.path() / "b";
  std::ofstream(a) << "new";
  std::ofstream(b) << "old";
  ASSERT_TRUE(files().Rename(a, b).ok());
  EXPECT_EQ(Slurp(b), "new");
  EXPECT_FALSE(files().Exists(a));
  ASSERT_TRUE(files().SyncFile(b).ok());
  ASSERT_TRUE(files().SyncDir(dir_.path()).ok());
  ASSERT_TRUE(files().Remove(b).ok());
  EXPECT_FALSE(files().Exists(b));
}

TEST_F(FileSystemTest, CreateDirsMakesEveryMissingParent) {
  const fs::path deep = dir_.path() / "x" / "y" / "z";
  ASSERT_TRUE(files().CreateDirs(deep).ok());
  EXPECT_TRUE(fs::is_directory(deep));
  EXPECT_TRUE(files().CreateDirs(deep).ok());  // exists: fine
}

TEST_F(FileSystemTest, StatTellsSizeAndModificationTime) {
  const fs::path file = dir_.path() / "m.bin";
  ASSERT_TRUE(files().WriteFile(file, "12345", {}).ok());
  Result<FileStat> first = files().Stat(file);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->size_bytes, 5);
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(first->modified_ns, int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec);
  // A rewrite with another time is seen.
  const fs::file_time_type later = fs::last_write_time(file) + std::chrono::seconds(3);
  fs::last_write_time(file, later);
  Result<FileStat> second = files().Stat(file);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->modified_ns - first->modified_ns, int64_t{3} * 1000000000);
}

// Every failing call: its code and a message naming the path and the cause.
TEST_F(FileSystemTest, ErrorsNameThePathAndTheCause) {
  const fs::path missing = dir_.path() / "missing" / "f";
  const fs::path file = dir_.path() / "file";
  std::ofstream(file) << "x";
  WriteFileOptions exclusive;
  exclusive.exclusive = true;
  struct Case {
    const char* what;
    std::function<Status()> call;
    StatusCode code;
    std::string message;
  };
  const std::string no_entry = std::strerror(ENOENT);
  const Case cases[] = {
      {"read", [&] { return files().ReadFile(missing).status(); }, StatusCode::kNotFound,
       "reading " + missing.string() + ": " + no_entry},
      {"write", [&] { return files().WriteFile(missing, "x", {}); }, StatusCode::kNotFound,
       "creating " + missing.string() + ": " + no_entry},
      {"exclusive", [&] { return files().WriteFile(file, "x", exclusive); }, StatusCode::kInternal,
       "creating " + file.string() + ": " + std::strerror(EEXIST)},
      {"fsync", [&] { return files().SyncFile(missing); }, StatusCode::kNotFound,
       "opening for fsync " + missing.string() + ": " + no_entry},
      {"fsync dir", [&] { return files().SyncDir(file); }, StatusCode::kNotFound,
       "opening for fsync " + file.string() + ": " + std::strerror(ENOTDIR)},
      {"rename", [&] { return files().Rename(missing, file); }, StatusCode::kNotFound,
       "renaming " + missing.string() + " to " + file.string() + ": " + no_entry},
      {"remove", [&] { return files().Remove(missing); }, StatusCode::kNotFound,
       "removing " + missing.string() + ": " + no_entry},
      {"mkdir over a file", [&] { return files().CreateDirs(file / "sub"); }, StatusCode::kNotFound,
       "creating the folder " + (file / "sub").string() + ": " + std::strerror(ENOTDIR)},
      {"stat", [&] { return files().Stat(missing).status(); }, StatusCode::kNotFound,
       "stat " + missing.string() + ": " + no_entry},
  };
  for (const Case& c : cases) {
    Status s = c.call();
    EXPECT_EQ(s.code(), c.code) << c.what << ": " << s.ToString();
    EXPECT_EQ(s.message().rfind(c.message, 0), 0u) << c.what << ": " << s.message();
  }
  EXPECT_FALSE(files().Exists(missing));
  EXPECT_EQ(Slurp(file), "x");  // the exclusive write left it alone
}

}  // namespace
}  // namespace tessera
