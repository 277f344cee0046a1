#include "daemon/controller/profile_cache.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/atomic_file.h"
#include "common/fake_clock.h"
#include "common/faulty_file_system.h"
#include "common/faulty_process_launcher.h"
#include "common/mutex.h"

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
  auto source = [&](const ProfileTarget& target) -> Result<std::string> {
    const std::string& model = target.model;
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

// A profile that running jobs contradict is measured again: the one in use
// answers until the new one is ready, then the new one (and its cache file);
// once per target; a failed measurement keeps the one in use.
TEST_F(ProfileCacheTest, AContradictedProfileIsMeasuredAgainAndReplacesTheOldOne) {
  std::atomic<int> calls{0};
  std::atomic<bool> fail{false};
  Mutex gate_mu;
  bool open = true;  // the source waits while false
  auto source = [&](const ProfileTarget& target) -> Result<std::string> {
    for (int i = 0; i < 500; ++i) {
      {
        MutexLock lock(gate_mu);
        if (open) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const int n = ++calls;
    if (fail) return Unavailable("worker exited 1");
    // Each measurement a different layer count, to tell them apart.
    nlohmann::json j = nlohmann::json::parse(ProfileText(target.model));
    for (int i = 1; i < n; ++i) j["layers"].push_back(j["layers"][0]);
    return j.dump();
  };
  auto wait_for_layers = [](ProfileCache& cache, const std::string& model, size_t layers) {
    for (int i = 0; i < 500; ++i) {
      auto p = cache.Get(model);
      if (p.ok() && p->layers.size() == layers) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  ProfileCache cache(dir_, {"m1", "m2"}, source);
  EXPECT_FALSE(cache.Remeasure(BuiltinTarget("m1"), "no profile yet"));
  cache.StartWarmup();
  ASSERT_TRUE(wait_for_layers(cache, "m1", 1));
  ASSERT_TRUE(wait_for_layers(cache, "m2", 2));
  {
    MutexLock lock(gate_mu);
    open = false;
  }
  EXPECT_TRUE(cache.Remeasure(BuiltinTarget("m1"), "observed 0.59x"));
  EXPECT_FALSE(cache.Remeasure(BuiltinTarget("m1"), "queued already"));
  auto during = cache.Get("m1");
  ASSERT_TRUE(during.ok()) << "the old profile answers meanwhile: " << during.status().ToString();
  EXPECT_EQ(during->layers.size(), 1u);
  {
    MutexLock lock(gate_mu);
    open = true;
  }
  EXPECT_TRUE(wait_for_layers(cache, "m1", 3));
  auto cached = nlohmann::json::parse(std::ifstream(dir_ / "m1.json"));
  EXPECT_EQ(cached["layers"].size(), 3u) << "the cache file holds the new one";
  EXPECT_FALSE(cache.Remeasure(BuiltinTarget("m1"), "measured again once already"));
  // A measurement that fails keeps the profile in use.
  fail = true;
  EXPECT_TRUE(cache.Remeasure(BuiltinTarget("m2"), "observed 1.8x"));
  for (int i = 0; i < 500 && calls.load() < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto kept = cache.Get("m2");
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(kept->layers.size(), 2u);
  EXPECT_EQ(calls.load(), 4);
}

// A profile whose cache file cannot be written (its fsync or its rename
// fails) is still used; the warning names the file and the cause, nothing
// is left in the folder, and the next start measures it again.
TEST_F(ProfileCacheTest, ProfileThatCannotBeCachedIsUsedAndTheFailureLogged) {
  struct Case {
    FileOp op;
    int err;
  };
  for (const Case& c : {Case{FileOp::kSync, EIO}, Case{FileOp::kRename, ENOSPC}}) {
    fs::remove_all(dir_);
    auto log = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
    spdlog::default_logger()->sinks().push_back(log);
    std::atomic<int> calls{0};
    auto source = [&](const ProfileTarget& target) -> Result<std::string> {
      ++calls;
      return ProfileText(target.model);
    };
    FaultyFileSystem faulty;
    faulty.FailNext(c.op, "m1.json", c.err);
    {
      ProfileCache cache(dir_, {"m1"}, source, nullptr, &faulty);
      cache.StartWarmup();
      for (int i = 0; i < 500 && !cache.Get("m1").ok(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      EXPECT_TRUE(cache.Get("m1").ok());
    }
    spdlog::default_logger()->sinks().pop_back();
    EXPECT_EQ(faulty.fired(), 1);
    const std::string file = (dir_ / "m1.json").string();
    bool logged = false;
    for (const std::string& line : log->last_formatted()) {
      logged = logged || (line.find("profile of m1 not cached") != std::string::npos &&
                          line.find("cannot write " + file) != std::string::npos &&
                          line.find(std::strerror(c.err)) != std::string::npos);
    }
    EXPECT_TRUE(logged) << "no warning naming " << file;
    EXPECT_FALSE(fs::exists(file));
    for (const auto& e : fs::directory_iterator(dir_)) {
      EXPECT_FALSE(IsTempFileName(e.path().filename().string())) << e.path();
    }
    ProfileCache again(dir_, {"m1"}, source);  // a restart: measures again, and keeps it
    again.StartWarmup();
    for (int i = 0; i < 500 && !again.Get("m1").ok(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(again.Get("m1").ok());
    EXPECT_EQ(calls.load(), 2);
    EXPECT_TRUE(fs::exists(file));
  }
}

TEST_F(ProfileCacheTest, WhileMeasuringItSaysAboutHowLong) {
  FakeClock clock;
  std::atomic<bool> second_started{false}, release{false};
  auto source = [&](const ProfileTarget& target) -> Result<std::string> {
    const std::string& model = target.model;
    if (model == "m1") {
      clock.Advance(std::chrono::seconds(20));  // the first measurement takes 20 s
    } else {
      second_started = true;
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return ProfileText(model);
  };
  ProfileCache cache(dir_, {"m1", "m2"}, source, &clock);
  struct Releaser {  // lets the warm-up end before the cache joins it, whatever fails
    std::atomic<bool>& release;
    ~Releaser() { release = true; }
  } releaser{release};
  auto message = [&](const std::string& model) { return cache.Get(model).status().message(); };
  // Nothing measured yet: 30 s a model, in the warm-up's order.
  EXPECT_EQ(message("m1"), "measuring the model profile (about 30 s)");
  EXPECT_EQ(message("m2"), "measuring the model profile (about 60 s)");
  EXPECT_TRUE(IsMeasuringProfile(cache.Get("m2").status()));
  EXPECT_EQ(cache.Get("m2").status().field(), "profile");
  cache.StartWarmup();
  for (int i = 0; i < 500 && !second_started; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(second_started.load());
  EXPECT_TRUE(cache.Get("m1").ok());
  EXPECT_EQ(message("m2"), "measuring the model profile (about 20 s)") << "as long as m1 took";
  clock.Advance(std::chrono::seconds(15));
  EXPECT_EQ(message("m2"), "measuring the model profile (about 5 s)");
  clock.Advance(std::chrono::seconds(30));
  EXPECT_EQ(message("m2"), "measuring the model profile (about 1 s)") << "late, but still soon";
  EXPECT_EQ(MeasuringProfileAnswer(cache.Get("m2").status()),
            (nlohmann::json{{"state", "measuring_profile"},
                            {"message", "measuring the model profile (about 1 s)"},
                            {"retry_after_s", 2}}));
  EXPECT_FALSE(IsMeasuringProfile(Unavailable("worker exited 1")));
}

TEST_F(ProfileCacheTest, WorkerSourceReportsAFailingBinary) {
  auto source = WorkerProfileSource("/bin/false");
  auto r = source(BuiltinTarget("colorize-unet"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  // A binary that is not there: the child exits 127.
  r = WorkerProfileSource((dir_ / "no-such-worker").string())(BuiltinTarget("colorize-unet"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("exit status " + std::to_string(127 << 8)), std::string::npos)
      << r.status().message();
}

TEST_F(ProfileCacheTest, WorkerSourceReportsALaunchFailure) {
  FaultyProcessLauncher launcher;
  launcher.FailNextLaunch(EAGAIN, "tessera-worker");
  auto source = WorkerProfileSource("/usr/bin/tessera-worker", &launcher);
  auto r = source(BuiltinTarget("colorize-unet"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message(), "fork failed: " + std::string(std::strerror(EAGAIN)));
  EXPECT_EQ(launcher.fired(), 1);
}

// The worker is run with the target's own arguments.
TEST_F(ProfileCacheTest, WorkerSourceRunsTheTargetsArguments) {
  ProfileTarget file;
  file.model_file = "/srv/models/seq.pt";
  file.options = {"--image-input", "gray", "--loss", "l1"};
  struct Row {
    ProfileTarget target;
    std::string printed;
  } rows[] = {
      {BuiltinTarget("colorize-unet"), "profile --model colorize-unet --batch 8 --fixed-batch 2\n"},
      {file,
       "profile --model-file /srv/models/seq.pt --image-input gray --loss l1 --batch 8 "
       "--fixed-batch 2\n"},
  };
  for (const Row& row : rows) {
    auto r = WorkerProfileSource("/bin/echo")(row.target);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, row.printed);
  }
}

// Waits until `target` is no longer being measured; its last answer.
Result<scheduler::ModelProfile> Settled(ProfileCache& cache, const ProfileTarget& target) {
  Result<scheduler::ModelProfile> r = cache.Get(target);
  for (int i = 0; i < 500 && IsMeasuringProfile(r.status()); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    r = cache.Get(target);
  }
  return r;
}

// A profile whose repeats disagree (a busy host) is measured again, up to
// kMaxMeasurements times, and the steadiest is kept.
TEST_F(ProfileCacheTest, AProfileWhoseRepeatsDisagreeIsMeasuredAgain) {
  struct Row {
    const char* name;
    std::vector<double> spreads;  // what each measurement says (< 0: no field)
    int measured;                 // how many the cache asks for
    std::string kept;             // the model name of the one kept
  } rows[] = {
      {"steady", {0.05}, 1, "m-0"},
      {"no field", {-1}, 1, "m-0"},
      {"busy once", {0.6, 0.1}, 2, "m-1"},
      {"busy throughout", {0.6, 0.3, 0.4}, ProfileCache::kMaxMeasurements, "m-1"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    fs::remove_all(dir_);
    std::atomic<int> calls{0};
    auto source = [&](const ProfileTarget&) -> Result<std::string> {
      const int i = calls++;
      nlohmann::json j = nlohmann::json::parse(ProfileText("m-" + std::to_string(i)));
      const double spread = row.spreads[std::min<size_t>(i, row.spreads.size() - 1)];
      if (spread >= 0) j["repeat_spread"] = spread;
      return j.dump();
    };
    ProfileCache cache(dir_, {"m"}, source);
    cache.StartWarmup();
    Result<scheduler::ModelProfile> p = Settled(cache, BuiltinTarget("m"));
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(calls.load(), row.measured);
    EXPECT_EQ(p->name, row.kept);
  }
}

// A lab's model file is measured when a job first asks (no warm-up needed),
// once per file version and options: a file replaced in place is measured
// again, a restarted daemon reads the cache folder, other options are
// another profile.
TEST_F(ProfileCacheTest, AModelFileIsMeasuredOnFirstAskAndAgainWhenReplaced) {
  fs::create_directories(dir_);
  const fs::path model = dir_ / "seq.pt";
  std::ofstream(model) << "version 1";
  std::vector<std::string> runs;
  Mutex mu;
  auto source = [&](const ProfileTarget& target) -> Result<std::string> {
    std::string args;
    for (const std::string& a : target.WorkerArgs()) args += (args.empty() ? "" : " ") + a;
    MutexLock lock(mu);
    runs.push_back(args);
    return ProfileText("seq");
  };
  auto count = [&] {
    MutexLock lock(mu);
    return runs.size();
  };
  ProfileTarget target;
  target.model_file = model.string();
  target.options = {"--loss", "l1"};
  const fs::path cache_dir = dir_ / "profiles";
  {
    ProfileCache cache(cache_dir, {}, source);
    Result<scheduler::ModelProfile> first = cache.Get(target);
    EXPECT_TRUE(IsMeasuringProfile(first.status())) << first.status().ToString();
    Result<scheduler::ModelProfile> p = Settled(cache, target);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->name, "seq");
    ASSERT_EQ(count(), 1u);
    EXPECT_EQ(runs[0], "--model-file " + model.string() + " --loss l1");
    EXPECT_TRUE(cache.Get(target).ok());
    EXPECT_EQ(count(), 1u) << "asked again: served from memory";

    // Another loss is another profile.
    ProfileTarget mse = target;
    mse.options = {"--loss", "mse"};
    EXPECT_TRUE(Settled(cache, mse).ok());
    EXPECT_EQ(count(), 2u);

    // The file replaced (another size and time): measured again.
    std::ofstream(model) << "version two";
    fs::last_write_time(model, fs::last_write_time(model) + std::chrono::seconds(5));
    EXPECT_TRUE(IsMeasuringProfile(cache.Get(target).status()));
    EXPECT_TRUE(Settled(cache, target).ok());
    EXPECT_EQ(count(), 3u);
  }
  size_t cached = 0;
  for (const auto& e : fs::directory_iterator(cache_dir)) {
    cached += e.path().filename().string().starts_with("file-") ? 1 : 0;
  }
  EXPECT_EQ(cached, 3u);
  // A restart: the current version's profile comes from the folder.
  ProfileCache again(cache_dir, {}, source);
  EXPECT_TRUE(Settled(again, target).ok());
  EXPECT_EQ(count(), 3u);
}

// A file tesserad cannot stat answers why at once; one whose profile fails
// keeps that error (not measured again) until the file changes.
TEST_F(ProfileCacheTest, AModelFileThatCannotBeProfiledSaysWhy) {
  fs::create_directories(dir_);
  std::atomic<int> calls{0};
  auto source = [&](const ProfileTarget&) -> Result<std::string> {
    ++calls;
    return Unavailable("the module's forward is not its layers in order");
  };
  ProfileCache cache(dir_ / "profiles", {}, source);
  ProfileTarget missing;
  missing.model_file = (dir_ / "missing.pt").string();
  Result<scheduler::ModelProfile> r = cache.Get(missing);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("stat " + missing.model_file), std::string::npos)
      << r.status().message();
  EXPECT_EQ(calls.load(), 0);

  ProfileTarget residual;
  residual.model_file = (dir_ / "residual.pt").string();
  std::ofstream(residual.model_file) << "x";
  r = Settled(cache, residual);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("not its layers in order"), std::string::npos);
  EXPECT_EQ(cache.Get(residual).status(), r.status());
  EXPECT_EQ(calls.load(), 1);
}

}  // namespace
}  // namespace tessera::daemon
