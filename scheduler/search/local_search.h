// Local searches of the planner: the micro-batch scans every layout uses.
//
// Purpose: the step time as a function of the micro-batch count M is bumpy (memory
// rounds ceil(b / M)) but roughly unimodal; these scans find a good M with few
// evaluations. The other local searches, around the best plan of a layout, are
// members of Search (scheduler/search/search.h) and live in local_search.cc too:
// ImprovePipelineOrder (the pipeline's devices and their order) and Polish (stage
// boundaries, devices, samples and M, scored by the full cost model).
// Internal to the planner. Thread safety: pure functions (f may have effects).
#ifndef TESSERA_SCHEDULER_SEARCH_LOCAL_SEARCH_H_
#define TESSERA_SCHEDULER_SEARCH_LOCAL_SEARCH_H_

#include <cstdint>
#include <functional>
#include <vector>

namespace tessera::scheduler {

// Micro-batch counts tried first: 1, 2, 3, 4, 6, 8, 12, 16, ... up to max_m, and max_m
// itself; ascending, no duplicates. Empty when max_m < 1.
std::vector<int> CoarseMicroBatches(int64_t max_m);

// Minimises f (a step time; infinity: infeasible) over micro-batch counts 1..max_m:
// every count when max_m <= 32, else CoarseMicroBatches(max_m); then a local descent
// with steps 8, 4, 2, 1 around the best. f is called at most once per count; the scan
// returns nothing (f records what it finds). Nothing is called when max_m < 1.
void ScanMicroBatches(int64_t max_m, const std::function<double(int)>& f);

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_SEARCH_LOCAL_SEARCH_H_
