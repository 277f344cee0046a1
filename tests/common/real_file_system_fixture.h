// RealFileSystemTest: the fixture of tests that use the real FileSystem on a
// fresh temporary folder (removed with its contents after each test).
#ifndef TESSERA_TESTS_COMMON_REAL_FILE_SYSTEM_FIXTURE_H_
#define TESSERA_TESTS_COMMON_REAL_FILE_SYSTEM_FIXTURE_H_

#include <gtest/gtest.h>

#include "common/file_system.h"
#include "tests/common/temp_dir.h"

namespace tessera::testing {

class RealFileSystemTest : public ::testing::Test {
 protected:
  FileSystem& files() { return *FileSystem::Default(); }
  TempDir dir_;
};

}  // namespace tessera::testing

#endif  // TESSERA_TESTS_COMMON_REAL_FILE_SYSTEM_FIXTURE_H_
