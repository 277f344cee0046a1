// tesserad's secret files: one line, private, replaced atomically; a write
// whose fsync or rename fails is returned naming the file, which keeps its
// previous line.
#include "daemon/secret_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/atomic_file.h"
#include "common/faulty_file_system.h"
#include "tests/daemon/temp_dir.h"

namespace tessera::daemon {
namespace {

TEST(SecretFileTest, WrittenPrivatelyAndReadBack) {
  testing::TempDir dir;
  const std::filesystem::path file = dir.File("join-token");
  EXPECT_EQ(ReadSecretLine(*FileSystem::Default(), file).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(WriteSecretLine(*FileSystem::Default(), file, "tsj_abc").ok());
  EXPECT_EQ(ReadSecretLine(*FileSystem::Default(), file).value_or(""), "tsj_abc");
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u);
  std::ofstream(file) << "\nsecond line";
  EXPECT_EQ(ReadSecretLine(*FileSystem::Default(), file).status().message(),
            "cannot read " + file.string());
}

TEST(SecretFileTest, FailedWriteSurfacesAndKeepsTheOldLine) {
  for (const FileFault& c : {FileFault{FileOp::kSync, EIO}, FileFault{FileOp::kRename, EXDEV},
                             FileFault{FileOp::kSyncDir, EIO}}) {
    testing::TempDir dir;
    const std::filesystem::path file = dir.File("lease-key");
    ASSERT_TRUE(WriteSecretLine(*FileSystem::Default(), file, "old").ok());
    FaultyFileSystem faulty;
    faulty.FailNext(c.op, c.op == FileOp::kSyncDir ? dir.path().string() : "lease-key", c.err);
    Status written = WriteSecretLine(faulty, file, "new");
    ASSERT_FALSE(written.ok());
    EXPECT_EQ(written.code(), StatusCode::kUnavailable);
    EXPECT_EQ(written.message().rfind("cannot write " + file.string() + ": ", 0), 0u)
        << written.message();
    EXPECT_NE(written.message().find(std::strerror(c.err)), std::string::npos);
    // Before the rename the old line stays; after it (the folder's fsync
    // failed) the new one is there but was not reported durable.
    EXPECT_EQ(ReadSecretLine(*FileSystem::Default(), file).value_or(""),
              c.op == FileOp::kSyncDir ? "new" : "old");
    for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
      EXPECT_FALSE(IsTempFileName(e.path().filename().string())) << e.path();
    }
  }
}

}  // namespace
}  // namespace tessera::daemon
