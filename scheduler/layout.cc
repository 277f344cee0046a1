#include "scheduler/layout.h"

namespace tessera::scheduler {

std::string_view LayoutName(Layout layout) {
  switch (layout) {
    case Layout::kAuto:
      return "auto";
    case Layout::kData:
      return "data";
    case Layout::kPipeline:
      return "pipeline";
    case Layout::kHybrid:
      return "hybrid";
    case Layout::kTiled:
      return "tiled";
  }
  return "auto";
}

std::optional<Layout> ParseLayout(std::string_view name) {
  for (Layout l :
       {Layout::kAuto, Layout::kData, Layout::kPipeline, Layout::kHybrid, Layout::kTiled}) {
    if (LayoutName(l) == name) return l;
  }
  return std::nullopt;
}

std::string_view ScheduleName(Schedule schedule) {
  return schedule == Schedule::kGPipe ? "gpipe" : "1f1b";
}

std::optional<Schedule> ParseSchedule(std::string_view name) {
  for (Schedule s : {Schedule::kGPipe, Schedule::k1F1B}) {
    if (ScheduleName(s) == name) return s;
  }
  return std::nullopt;
}

}  // namespace tessera::scheduler
