#include "scheduler/layout.h"

#include "common/enum_names.h"

namespace tessera::scheduler {

constexpr EnumName<Layout> kLayoutNames[] = {
    {Layout::kAuto, "auto"},     {Layout::kData, "data"},   {Layout::kPipeline, "pipeline"},
    {Layout::kHybrid, "hybrid"}, {Layout::kTiled, "tiled"},
};
static_assert(IsValidNameTable(kLayoutNames));

constexpr EnumName<Schedule> kScheduleNames[] = {
    {Schedule::kGPipe, "gpipe"},
    {Schedule::k1F1B, "1f1b"},
};
static_assert(IsValidNameTable(kScheduleNames));

std::string_view LayoutName(Layout layout) { return NameOf(kLayoutNames, layout, "auto"); }

std::optional<Layout> ParseLayout(std::string_view name) { return ParseName(kLayoutNames, name); }

std::string_view ScheduleName(Schedule schedule) {
  return NameOf(kScheduleNames, schedule, "1f1b");
}

std::optional<Schedule> ParseSchedule(std::string_view name) {
  return ParseName(kScheduleNames, name);
}

}  // namespace tessera::scheduler
