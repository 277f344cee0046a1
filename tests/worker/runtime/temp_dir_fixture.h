// Temporary folders of the worker runtime tests: MakeTempDir, and
// TempDirTest, a fixture that gives each test its own folder, removed after
// a test that passed and kept (its path on stderr) after one that failed;
// FilesIn, what a folder holds. Files are read back with Slurp
// (tests/common/temp_dir.h).
#ifndef TESSERA_TESTS_WORKER_RUNTIME_TEMP_DIR_FIXTURE_H_
#define TESSERA_TESTS_WORKER_RUNTIME_TEMP_DIR_FIXTURE_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "tests/common/temp_dir.h"

namespace tessera::worker::testing {

using ::tessera::testing::Slurp;

// A new folder /tmp/tessera-<tag>-XXXXXX.
inline std::filesystem::path MakeTempDir(const std::string& tag) {
  std::string tmpl = "/tmp/tessera-" + tag + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  return std::filesystem::path(::mkdtemp(buf.data()));
}

// Every regular file under `dir`, its path relative to `dir`, sorted.
inline std::vector<std::string> FilesIn(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out.push_back(e.path().lexically_relative(dir).generic_string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// dir_: a new folder for each test, named after the test suite.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string suite = ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name();
    std::replace(suite.begin(), suite.end(), '/', '-');
    dir_ = MakeTempDir(suite);
  }
  void TearDown() override {
    if (HasFailure()) {
      std::fprintf(stderr, "kept %s for inspection\n", dir_.c_str());
      return;
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::filesystem::path dir_;
};

}  // namespace tessera::worker::testing

#endif  // TESSERA_TESTS_WORKER_RUNTIME_TEMP_DIR_FIXTURE_H_
