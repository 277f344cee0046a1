// The node credential file: kept private and whole, and a write that fails
// (fsync, rename) is returned naming the file, which keeps the old
// credential.
#include "agent/node_credential_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "common/atomic_file.h"
#include "common/faulty_file_system.h"
#include "tests/agent/test_util.h"

namespace tessera::agent {
namespace {

using testing::ReadFile;
using testing::TempDir;

const std::string kFirst = "tsn_0000000000000001_" + std::string(64, 'a');
const std::string kSecond = "tsn_0000000000000002_" + std::string(64, 'b');

TEST(NodeCredentialFile, StoredPrivatelyAndLoadedForItsNodeOnly) {
  TempDir state;
  const std::string file = state.File("node-credential");
  auto none = LoadNodeCredential(file, "node-a");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(StoreNodeCredential(file, kFirst, "node-a").ok());
  EXPECT_EQ(ReadFile(file), kFirst + "\nnode-a\n");
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto kept = LoadNodeCredential(file, "node-a");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->value_or(""), kFirst);
  auto other = LoadNodeCredential(file, "node-b");
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->has_value());
}

TEST(NodeCredentialFile, FailedWriteSurfacesAndKeepsTheOldCredential) {
  for (const FileFault& c : {FileFault{FileOp::kSync, EIO}, FileFault{FileOp::kRename, EXDEV},
                             FileFault{FileOp::kWrite, ENOSPC}}) {
    TempDir state;
    const std::string file = state.File("node-credential");
    ASSERT_TRUE(StoreNodeCredential(file, kFirst, "node-a").ok());
    FaultyFileSystem faulty;
    faulty.FailNext(c.op, "node-credential", c.err);
    Status stored = StoreNodeCredential(file, kSecond, "node-a", &faulty);
    ASSERT_FALSE(stored.ok());
    EXPECT_EQ(stored.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(stored.field(), "credential_file");
    EXPECT_EQ(stored.message().rfind("cannot write " + file + ": ", 0), 0u) << stored.message();
    EXPECT_NE(stored.message().find(std::strerror(c.err)), std::string::npos) << stored.message();
    EXPECT_EQ(ReadFile(file), kFirst + "\nnode-a\n");
    for (const auto& e : std::filesystem::directory_iterator(state.path())) {
      EXPECT_FALSE(IsTempFileName(e.path().filename().string())) << e.path();
    }
  }
}

TEST(NodeCredentialFile, UnreadableFileNamesTheField) {
  TempDir state;
  const std::string file = state.File("node-credential");
  ASSERT_TRUE(StoreNodeCredential(file, kFirst, "node-a").ok());
  FaultyFileSystem faulty;
  faulty.FailNext(FileOp::kRead, "node-credential", EIO);
  auto loaded = LoadNodeCredential(file, "node-a", &faulty);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().field(), "credential_file");
  EXPECT_EQ(loaded.status().message(), "cannot read " + file);
}

}  // namespace
}  // namespace tessera::agent
