#include "launch/rank_files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/common/temp_dir.h"

namespace tessera::launch {
namespace {

using tessera::testing::Slurp;
using tessera::testing::TempDir;

void WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

TEST(RankFiles, PathsFollowTheLayout) {
  RankPaths p = RankPathsFor("/s", api::WorkerKey{7, 2, 3});
  EXPECT_EQ(p.dir, "/s/jobs/7/2/rank-3");
  EXPECT_EQ(p.plan, "/s/jobs/7/2/rank-3/plan.json");
  EXPECT_EQ(p.progress, "/s/jobs/7/2/rank-3/progress.jsonl");
}

TEST(RankFiles, LogTailKeepsLastLinesAndPartialLast) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 150; ++i) text += "line " + std::to_string(i) + "\n";
  text += "partial";
  WriteFile(dir.path() / "worker.log", text);
  auto tail = ReadLogTail(dir.path() / "worker.log", 100);
  ASSERT_EQ(tail.size(), 100u);
  EXPECT_EQ(tail.front(), "line 51");
  EXPECT_EQ(tail[98], "line 149");
  EXPECT_EQ(tail.back(), "partial");
}

TEST(RankFiles, LogTailContinuesIntoRotatedFile) {
  TempDir dir;
  WriteFile(dir.path() / "worker.log.1", "old 1\nold 2\nold 3\n");
  WriteFile(dir.path() / "worker.log", "new 1\n");
  auto tail = ReadLogTail(dir.path() / "worker.log", 3);
  EXPECT_EQ(tail, (std::vector<std::string>{"old 2", "old 3", "new 1"}));
}

TEST(RankFiles, LogTailCutsLongLines) {
  TempDir dir;
  WriteFile(dir.path() / "worker.log", std::string(10000, 'x') + "\nshort\n");
  auto tail = ReadLogTail(dir.path() / "worker.log", 100, 64);
  ASSERT_FALSE(tail.empty());
  EXPECT_EQ(tail.back(), "short");
  for (const auto& l : tail) EXPECT_LE(l.size(), 64u);
}

TEST(RankFiles, LogTailKeepsTheLastRewriteOfProgressBars) {
  TempDir dir;
  WriteFile(dir.path() / "worker.log", "epoch 1\n 10%\r 50%\r100%\r\ndone\n");
  EXPECT_EQ(ReadLogTail(dir.path() / "worker.log"),
            (std::vector<std::string>{"epoch 1", "100%", "done"}));
}

TEST(RankFiles, LogTailStaysWithinTheByteBudget) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 100; ++i) text += std::string(900, 'a' + i % 26) + "\n";
  text += "last\n";
  WriteFile(dir.path() / "worker.log", text);
  auto tail = ReadLogTail(dir.path() / "worker.log", 100, 1024, 8000);
  size_t total = 0;
  for (const auto& l : tail) total += l.size() + 1;
  EXPECT_LE(total, 8000u);
  ASSERT_FALSE(tail.empty());
  EXPECT_EQ(tail.back(), "last");
  EXPECT_EQ(tail.size(), 9u);
}

TEST(RankFiles, MissingLogIsEmptyTail) {
  TempDir dir;
  EXPECT_TRUE(ReadLogTail(dir.path() / "none.log").empty());
}

struct ProgressRow {
  const char* name;
  const char* text;
  api::Json want;
};

TEST(RankFiles, LastCompleteProgressLine) {
  const ProgressRow rows[] = {
      {"empty", "", nullptr},
      {"one", "{\"step\":1}\n", api::Json{{"step", 1}}},
      {"last_wins", "{\"step\":1}\n{\"step\":2}\n", api::Json{{"step", 2}}},
      {"partial_ignored", "{\"step\":1}\n{\"step\":2", api::Json{{"step", 1}}},
      {"garbage_skipped", "{\"step\":1}\nnot json\n", api::Json{{"step", 1}}},
      {"only_partial", "{\"step\":", nullptr},
  };
  for (const auto& row : rows) {
    TempDir dir;
    WriteFile(dir.path() / "p.jsonl", row.text);
    EXPECT_EQ(ReadLastProgress(dir.path() / "p.jsonl"), row.want) << row.name;
  }
}

TEST(RankFiles, NewestProgressLinesOldestFirst) {
  TempDir dir;
  const auto file = dir.path() / "p.jsonl";
  EXPECT_TRUE(ReadProgressLines(file, 10).empty()) << "missing file";
  WriteFile(file, "{\"step\":1}\nnot json\n[1,2]\n{\"step\":2}\n{\"step\":3}\n{\"step\":");
  EXPECT_EQ(ReadProgressLines(file, 10),
            (std::vector<api::Json>{{{"step", 1}}, {{"step", 2}}, {{"step", 3}}}))
      << "objects only, the partial last line left for later";
  EXPECT_EQ(ReadProgressLines(file, 2), (std::vector<api::Json>{{{"step", 2}}, {{"step", 3}}}));
  // Only the last 64 KiB are read; a line the window cuts is skipped.
  std::string big;
  for (int step = 1; step <= 5000; ++step) big += "{\"step\":" + std::to_string(step) + "}\n";
  WriteFile(file, big);
  const std::vector<api::Json> tail = ReadProgressLines(file, 100000);
  ASSERT_FALSE(tail.empty());
  EXPECT_EQ(tail.back(), (api::Json{{"step", 5000}}));
  EXPECT_LT(tail.size(), 5000u);
  EXPECT_GT(tail.size(), 4000u);
  EXPECT_EQ(tail.front()["step"].get<int>() + static_cast<int>(tail.size()) - 1, 5000);
}

TEST(RankFiles, RotationShiftsAndKeepsN) {
  TempDir dir;
  auto log = dir.path() / "worker.log";
  EXPECT_FALSE(RotateLogIfNeeded(log, 10, 2));  // missing: nothing to do
  for (int round = 1; round <= 3; ++round) {
    WriteFile(log, "round " + std::to_string(round) + " with more than ten bytes\n");
    EXPECT_TRUE(RotateLogIfNeeded(log, 10, 2));
    EXPECT_EQ(std::filesystem::file_size(log), 0u);
  }
  EXPECT_EQ(Slurp(dir.path() / "worker.log.1"), "round 3 with more than ten bytes\n");
  EXPECT_EQ(Slurp(dir.path() / "worker.log.2"), "round 2 with more than ten bytes\n");
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "worker.log.3"));
  WriteFile(log, "small\n");
  EXPECT_FALSE(RotateLogIfNeeded(log, 10, 2));
}

}  // namespace
}  // namespace tessera::launch
