// Builders for the fixtures the CLI's tests share (tests/cli/ and
// tests/api/cli_test.cc): what a running job reports (a training job's metric
// points, an infer job's progress) and a file in a test's folder.
#ifndef TESSERA_TESTS_CLI_BUILDERS_H_
#define TESSERA_TESTS_CLI_BUILDERS_H_

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "api/lease_protocol.h"
#include "api/types.h"
#include "tests/common/temp_dir.h"

namespace tessera::cli::testing {

// Rank `rank`'s metric point of attempt `attempt` at `step`, with `loss`,
// written one second a step after 2023-11-14 22:13:20Z.
inline api::MetricPoint Point(int64_t step, int64_t attempt, int64_t rank,
                              std::optional<double> loss) {
  return {.step = step,
          .attempt = attempt,
          .rank = rank,
          .ts_ms = 1'700'000'000'000 + step * 1000,
          .loss = loss};
}

// An infer job on two ranks (a:0 and b:1, 3200 images each): 6400 of 10000
// images and 200 of 313 chunks done, 3 leased, 812.5 images/s, 4.43 s to go.
inline api::InferenceProgress InferenceUnderWay() {
  return {.images_total = 10000,
          .images_done = 6400,
          .chunks_total = 313,
          .chunks_done = 200,
          .chunks_leased = 3,
          .images_per_s = 812.5,
          .eta_s = 4.43,
          .devices = {{0, "a:0", 3200, 410.25}, {1, "b:1", 3200, 402.25}}};
}

// Writes `text` to `name` in `dir`, making the folders between; returns its path.
inline std::string WriteFile(const tessera::testing::TempDir& dir, const std::string& name,
                             const std::string& text) {
  const std::filesystem::path path = dir.path() / name;
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
  return path.string();
}

}  // namespace tessera::cli::testing

#endif  // TESSERA_TESTS_CLI_BUILDERS_H_
