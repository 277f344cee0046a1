#include "daemon/profile_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

namespace tessera::daemon {
namespace {
namespace fs = std::filesystem;

std::string ProfileText(const std::string& model) {
  return nlohmann::json{{"model", model},
                        {"batch", 2},
                        {"in_shape", {1, 32, 32}},
                        {"layers",
                         {{{"name", "a"},
                           {"fwd_flops_per_sample", 1e6},
                           {"param_bytes", 10},
                           {"activation_bytes_per_sample", 100},
                           {"output_bytes_per_sample", 100}}}}}
      .dump();
}

class ProfileCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera-profiles-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ProfileCacheTest, MeasuresOnceThenServesFromTheCacheFolder) {
  std::atomic<int> calls{0};
  auto source = [&](const std::string& model) -> Result<std::string> {
    ++calls;
    if (model == "broken") return Unavailable("worker exited 1");
    return ProfileText(model);
  };
  {
    ProfileCache cache(dir_, {"m1", "broken"}, source);
    EXPECT_EQ(cache.Get("m1").status().code(), StatusCode::kUnavailable) << "not measured yet";
    EXPECT_EQ(cache.Get("other").status().code(), StatusCode::kNotFound);
    cache.StartWarmup();
    for (int i = 0; i < 200 && cache.Get("broken").status().code() == StatusCode::kUnavailable &&
                    cache.Get("broken").status().message().find("measuring") != std::string::npos;
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    auto p = cache.Get("m1");
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->layers.size(), 1u);
    EXPECT_NE(cache.Get("broken").status().message().find("worker exited 1"), std::string::npos);
  }
  EXPECT_TRUE(fs::exists(dir_ / "m1.json"));
  EXPECT_EQ(calls.load(), 2);
  // A new cache (a restarted daemon) reads the file instead of measuring.
  ProfileCache again(dir_, {"m1"}, source);
  again.StartWarmup();
  for (int i = 0; i < 200 && !again.Get("m1").ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(again.Get("m1").ok());
  EXPECT_EQ(calls.load(), 2);
}

TEST_F(ProfileCacheTest, WorkerSourceReportsAFailingBinary) {
  auto source = WorkerProfileSource("/bin/false");
  auto r = source("colorize-unet");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tessera::daemon
