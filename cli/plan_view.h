// How the CLI renders a plan (scheduler/plan_json.h shapes) as text: the
// device list of `tessera plan`'s rows, and the stage table and prediction
// `tessera job ID` shows for a job's current plan.
//
// Thread safety: pure functions.
#ifndef TESSERA_CLI_PLAN_VIEW_H_
#define TESSERA_CLI_PLAN_VIEW_H_

#include <ostream>
#include <string>

#include "api/types.h"

namespace tessera::cli {

// The number at j[key] with printf format `fmt`, or "-" when absent.
std::string FormatNumber(const api::Json& j, const char* key, const char* fmt);

// A plan's devices, replica by replica: "a:0,a:1,b:0"; long lists are cut
// ("a:0,a:1,... (12)"); "-" when it has none.
std::string PlanDevices(const api::Json& plan);

// A plan as text: one line with its layout, shape and prediction ("hybrid:
// 2 replicas x 2 stages, 4 micro-batches (1f1b); predicted 0.412 s/step,
// 38.8 samples/s"), its why, then one row per stage (replica, stage, device,
// layers, batch, predicted stage time, peak memory). Tolerates missing
// fields (prints "-").
void PrintPlanDetail(std::ostream& out, const api::Json& plan);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_PLAN_VIEW_H_
