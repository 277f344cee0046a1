// Numbers as the planner writes them in reasons and `why` texts.
// Internal to the planner (scheduler/planner.cc, scheduler/baselines.cc,
// scheduler/search/). Thread safety: pure functions.
#ifndef TESSERA_SCHEDULER_PLANNER_TEXT_H_
#define TESSERA_SCHEDULER_PLANNER_TEXT_H_

#include <string>

namespace tessera::scheduler {

// One double through a printf format: Fmt("%.2fx ", 1.416) is "1.42x ".
// REQUIRES: fmt has exactly one double conversion. Results are cut at 63 characters.
std::string Fmt(const char* fmt, double v);

// Bytes in decimal units (FormatBytes): "1.5 GB".
std::string Gb(double bytes);

// Seconds as milliseconds with two decimals: "12.34 ms".
std::string Ms(double s);

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_PLANNER_TEXT_H_
