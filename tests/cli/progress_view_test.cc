// How the CLI renders an infer job's progress.
#include "cli/progress_view.h"

#include <gtest/gtest.h>

#include "tests/cli/builders.h"

namespace tessera::cli {
namespace {

TEST(ProgressViewTest, BarFillsInProportion) {
  struct Case {
    int64_t done, total;
    int width;
    std::string bar;
  } cases[] = {
      {0, 10, 10, "[----------]"},   {5, 10, 10, "[#####-----]"}, {10, 10, 10, "[##########]"},
      {99, 100, 10, "[#########-]"}, {3, 0, 4, "[----]"},         {12, 10, 4, "[####]"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ProgressBar(c.done, c.total, c.width), c.bar) << c.done << "/" << c.total;
  }
}

TEST(ProgressViewTest, DurationsReadNaturally) {
  struct Case {
    double seconds;
    std::string text;
  } cases[] = {
      {-1, "unknown"}, {0, "0.0 s"}, {4.44, "4.4 s"}, {725, "12 min 5 s"}, {12000, "3 h 20 min"}};
  for (const Case& c : cases) EXPECT_EQ(FormatDuration(c.seconds), c.text) << c.seconds;
}

TEST(ProgressViewTest, TerminalGetsTheBarAPipeDoesNot) {
  const api::InferenceProgress p = testing::InferenceUnderWay();
  const std::string tty = FormatInferenceProgress(p, true);
  const std::string pipe = FormatInferenceProgress(p, false);
  EXPECT_EQ(pipe,
            "images   6400 / 10000  64.0%\n"
            "chunks   200 done, 3 leased, 313 in all\n"
            "speed    812.5 images/s  eta 4.4 s\n"
            "rank 0   a:0   3200 images   410.2 images/s\n"
            "rank 1   b:1   3200 images   402.2 images/s\n");
  EXPECT_NE(tty.find("64.0%  [###################-----------]\n"), std::string::npos) << tty;
  EXPECT_EQ(InferenceProgressLine(p, false),
            "images 6400 / 10000  64.0%  812.5 images/s  eta 4.4 s");
}

}  // namespace
}  // namespace tessera::cli
