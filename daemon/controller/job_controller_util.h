// Small helpers the JobController's source files share (job_controller.cc,
// job_controller_infer.cc, job_controller_reform.cc,
// job_controller_placement.cc): device keys, the paged listing of jobs in a
// state, and the rank lists of event texts. Internal to the controller.
//
// Thread safety: free functions; the Store ones are as thread-safe as the
// Store.
#ifndef TESSERA_DAEMON_CONTROLLER_JOB_CONTROLLER_UTIL_H_
#define TESSERA_DAEMON_CONTROLLER_JOB_CONTROLLER_UTIL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/agent_protocol.h"
#include "api/types.h"
#include "common/status.h"
#include "daemon/store/store.h"

namespace tessera::daemon {

// "node:index", the key of a device in the controller's busy and placed sets.
std::string DeviceKey(const std::string& node, int64_t index);

// Every job in `state`, following the pagination cursor.
// REQUIRES: store != nullptr.
Result<std::vector<api::Job>> AllJobsIn(Store* store, api::JobState state);

// Whether every chunk of an infer job is done (false when unknown).
// REQUIRES: store != nullptr.
bool InferInputDone(Store* store, api::JobId job);

// How the result of an attempt the share round stopped to move the job
// starts (JobEvent::kMoved): such attempts do not count against max_attempts.
inline constexpr std::string_view kMovedAttemptResult = "moved: ";

// How many of `job`'s attempts ended in a move (their result starts with
// kMovedAttemptResult).
// REQUIRES: store != nullptr.
Result<int64_t> MovedAttempts(Store* store, api::JobId job);

// The integer member `key` ("step", "generation") of a progress line (a
// rank's report or a job's latest), or nullopt when it has none.
std::optional<int64_t> ProgressInt(const api::Json& line, const char* key);
// `line`'s number at `key` (integer or not), or nullopt.
std::optional<double> ProgressDouble(const api::Json& line, const char* key);

// Every progress line a beat brought of `w`: its queued lines, then its
// latest. The pointers point into `w`.
std::vector<const api::Json*> ProgressLinesOf(const api::WorkerStatus& w);

// The steps a train job of Tessera's own worker (a builtin: or model:
// entrypoint: it runs exactly spec.steps) has left by its latest progress; 0
// for any other job (a script's or an infer job's end is its own).
int64_t WorkerStepsLeft(const api::Job& job);

// "0,2,3".
std::string RankList(const std::vector<int64_t>& ranks);

// An infer attempt's ranks giving their devices up: "rank 2 gives boxc:0" or
// "ranks 2,3 give boxc:0, boxc:1".
std::string RanksGive(const std::vector<int64_t>& ranks, const std::vector<std::string>& devices);
// "the chunks it held went back to the queue" ("they", for more ranks than one).
std::string ChunksBackToQueue(const std::vector<int64_t>& ranks);

// "node boxb lost (no heartbeat), ranks 2; node boxc ...": the event text of
// lost nodes, whatever the attempt does about them.
std::string LostNodesText(const std::map<std::string, std::vector<int64_t>>& lost);

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_CONTROLLER_JOB_CONTROLLER_UTIL_H_
