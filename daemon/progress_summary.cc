#include "daemon/progress_summary.h"

namespace tessera::daemon {
namespace {

int64_t IntMember(const api::Json& line, const char* key) {
  auto it = line.find(key);
  return it != line.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

}  // namespace

ProgressAge AgeOf(const api::WorkerStatus& w) {
  ProgressAge age;
  age.attempt = w.key.attempt;
  if (w.progress.is_object()) {
    age.generation = IntMember(w.progress, "generation");
    age.step = IntMember(w.progress, "step");
  }
  return age;
}

std::map<api::JobId, const api::WorkerStatus*> NewestProgressPerJob(
    const std::vector<api::WorkerStatus>& workers) {
  std::map<api::JobId, const api::WorkerStatus*> newest;
  for (const api::WorkerStatus& w : workers) {
    if (w.progress.is_null()) continue;
    auto [it, inserted] = newest.try_emplace(w.key.job_id, &w);
    if (inserted) continue;
    const std::strong_ordering order = AgeOf(w) <=> AgeOf(*it->second);
    if (order > 0 || (order == 0 && w.key.rank < it->second->key.rank)) it->second = &w;
  }
  return newest;
}

}  // namespace tessera::daemon
