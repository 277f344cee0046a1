#include "daemon/controller/job_controller_util.h"

#include <algorithm>
#include <sstream>

#include "api/entrypoint_kind.h"

namespace tessera::daemon {

std::string DeviceKey(const std::string& node, int64_t index) {
  return node + ":" + std::to_string(index);
}

// Every job in a state, following the pagination cursor.
Result<std::vector<api::Job>> AllJobsIn(Store* store, api::JobState state) {
  std::vector<api::Job> out;
  api::JobQuery q;
  q.state = state;
  q.limit = 1000;
  while (true) {
    TESSERA_ASSIGN_OR_RETURN(api::JobPage page, store->ListJobs(q));
    out.insert(out.end(), page.jobs.begin(), page.jobs.end());
    if (!page.next_after) break;
    q.after = *page.next_after;
  }
  return out;
}

// Whether every chunk of an infer job is done (false when unknown).
bool InferInputDone(Store* store, api::JobId job) {
  auto counts = store->CountChunks(job);
  return counts.ok() && counts->chunks_total > 0 && counts->chunks_done == counts->chunks_total;
}

Result<int64_t> MovedAttempts(Store* store, api::JobId job) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<JobAttempt> attempts, store->ListAttempts(job));
  int64_t moved = 0;
  for (const JobAttempt& a : attempts) {
    if (a.result.starts_with(kMovedAttemptResult)) ++moved;
  }
  return moved;
}

std::optional<int64_t> ProgressInt(const api::Json& line, const char* key) {
  if (!line.is_object() || !line.contains(key) || !line[key].is_number_integer()) {
    return std::nullopt;
  }
  return line[key].get<int64_t>();
}

std::optional<double> ProgressDouble(const api::Json& line, const char* key) {
  if (!line.is_object() || !line.contains(key) || !line[key].is_number()) return std::nullopt;
  return line[key].get<double>();
}

std::vector<const api::Json*> ProgressLinesOf(const api::WorkerStatus& w) {
  std::vector<const api::Json*> lines;
  for (const api::Json& line : w.progress_lines) lines.push_back(&line);
  lines.push_back(&w.progress);
  return lines;
}

int64_t WorkerStepsLeft(const api::Job& job) {
  const api::EntrypointKind kind = api::EntrypointKindOf(job.spec.entrypoint);
  if (job.spec.kind != api::JobKind::kTrain || job.spec.steps <= 0 ||
      (kind != api::EntrypointKind::kBuiltin && kind != api::EntrypointKind::kModel)) {
    return 0;
  }
  return std::max<int64_t>(job.spec.steps - ProgressInt(job.progress, "step").value_or(0), 0);
}

std::string RankList(const std::vector<int64_t>& ranks) {
  std::ostringstream s;
  for (size_t i = 0; i < ranks.size(); ++i) s << (i ? "," : "") << ranks[i];
  return s.str();
}

std::string RanksGive(const std::vector<int64_t>& ranks, const std::vector<std::string>& devices) {
  std::string out = ranks.size() == 1 ? "rank " + RankList(ranks) + " gives "
                                      : "ranks " + RankList(ranks) + " give ";
  for (size_t i = 0; i < devices.size(); ++i) out += (i > 0 ? ", " : "") + devices[i];
  return out;
}

std::string ChunksBackToQueue(const std::vector<int64_t>& ranks) {
  return std::string("the chunks ") + (ranks.size() == 1 ? "it" : "they") +
         " held went back to the queue";
}

// "node boxb lost (no heartbeat), ranks 2; node boxc ...": the event text of
// lost nodes, whatever the attempt does about them.
std::string LostNodesText(const std::map<std::string, std::vector<int64_t>>& lost) {
  std::string text;
  for (const auto& [node, ranks] : lost) {
    text += (text.empty() ? "" : "; ") + std::string("node ") + node +
            " lost (no heartbeat), ranks " + RankList(ranks);
  }
  return text;
}

}  // namespace tessera::daemon
