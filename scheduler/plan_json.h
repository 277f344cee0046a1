// JSON of plans, as the controller stores and the REST API shows them.
//
// Plan: {"layout":"hybrid","dp":2,"pp":2,"micro_batches":8,"schedule":"1f1b",
//        "replicas":[{"batch":160,"grad_weight":0.625,"stages":[{"devices":["boxA:0"],
//        "layers":[0,14],"time_s":...,"peak_mem_bytes":...}]}],
//        "tiling":{...} (tiled only),
//        "predicted":{"step_s":0.412,"samples_per_s":621,"bubble":0.09,"comm":0.11,
//                     "peak_mem_bytes":{"boxA:0":61e9}},"why":"...",
//        "baselines":[{"name":"even_all","description":"an even split over all 4 devices",
//                      "feasible":true,"step_s":0.58,"speedup":1.41}, ...] (chosen plan only)}
// PlanSet: {"plans":[...],"rejected":[{"layout":"data","reason":"..."}],
//           "baselines":[{"name":"even_all","description":"...","feasible":true,
//                         "step_s":0.58,"speedup":1.41,"plan":{<a Plan, layout "data">}},
//                        {"name":"best_group","description":"the 2 A100s alone",
//                         "feasible":false,"reason":"doesn't fit on ...","step_s":null,
//                         "speedup":null,"plan":null}]}
// A baseline's plan has the shape of any plan, so a worker can run it as it is.
// Layer ranges are half-open [begin, end). A rejection for every layout has layout "any".
// Thread safety: pure functions.
#ifndef TESSERA_SCHEDULER_PLAN_JSON_H_
#define TESSERA_SCHEDULER_PLAN_JSON_H_

#include <nlohmann/json.hpp>

#include "scheduler/plan.h"

namespace tessera::scheduler {

nlohmann::json ToJson(const Plan& plan);
nlohmann::json ToJson(const PlanSet& plans);

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_PLAN_JSON_H_
