// TempDir: a fresh directory under the system temp folder, removed (with its
// contents) on destruction. For tests that need a real SQLite file.
#ifndef TESSERA_TESTS_DAEMON_TEMP_DIR_H_
#define TESSERA_TESTS_DAEMON_TEMP_DIR_H_

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

namespace tessera::daemon::testing {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("tessera-daemon-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) +
             "-" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

  // Concatenated bytes of every file in the directory.
  std::string AllBytes() const {
    std::string out;
    for (const auto& entry : std::filesystem::directory_iterator(path_)) {
      std::ifstream in(entry.path(), std::ios::binary);
      out.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    return out;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace tessera::daemon::testing

#endif  // TESSERA_TESTS_DAEMON_TEMP_DIR_H_
