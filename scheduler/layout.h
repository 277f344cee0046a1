// Layout and Schedule: how a plan lays a model over devices, and how a
// pipeline orders its micro-batches. The one vocabulary of the planner's plans
// (scheduler/plan.h), the rank plan tesserad writes (daemon/controller/attempt_launch.h,
// "layout" and "schedule") and the worker that reads it
// (worker/runtime/plan.h, infer_plan.h).
//
// Thread safety: values and pure functions.
#ifndef TESSERA_SCHEDULER_LAYOUT_H_
#define TESSERA_SCHEDULER_LAYOUT_H_

#include <optional>
#include <string_view>

namespace tessera::scheduler {

// kAuto is a request's "let the planner choose" (and a rejection's "every
// layout"); a plan is always one of the others. kTiled is inference only.
enum class Layout { kAuto, kData, kPipeline, kHybrid, kTiled };
// "auto", "data", "pipeline", "hybrid", "tiled".
std::string_view LayoutName(Layout layout);
// nullopt for any other text.
std::optional<Layout> ParseLayout(std::string_view name);

// kGPipe: all forwards, then all backwards (inference: forward-only fill/drain).
// k1F1B: one-forward-one-backward; stage s keeps min(M, S - s) micro-batches.
enum class Schedule { kGPipe, k1F1B };
// "gpipe" | "1f1b".
std::string_view ScheduleName(Schedule schedule);
// nullopt for any other text.
std::optional<Schedule> ParseSchedule(std::string_view name);

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_LAYOUT_H_
