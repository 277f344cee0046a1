// Which rank's progress line stands for its job (a job's `progress`, which
// `tessera job` shows and the queue pass reads for a running job's steps left
// and rate).
//
// Purpose: a beat carries the latest line of every rank of a node, and the
// ranks of one job may be of several attempts and worlds at once: after a
// planned shrink the left-out ranks are still reported (running, then exited)
// with the line of the world they left; after a restart an old attempt's
// exited rank is reported beside the new attempt's. A line's age orders them:
// its attempt, then the world that wrote it (the trainer's "generation",
// 0 when absent), then its step. The newest line per job stands for it, ties
// going to the lowest rank. Across beats (nodes beat in turn) a line older
// than the one already recorded for its job is not recorded.
//
// Thread safety: pure functions.
#ifndef TESSERA_DAEMON_PROGRESS_SUMMARY_H_
#define TESSERA_DAEMON_PROGRESS_SUMMARY_H_

#include <compare>
#include <cstdint>
#include <map>
#include <vector>

#include "api/agent_protocol.h"

namespace tessera::daemon {

struct ProgressAge {
  int64_t attempt = 0;
  int64_t generation = 0;  // the world within the attempt (re-forms)
  int64_t step = 0;
  auto operator<=>(const ProgressAge&) const = default;
};

// `w`'s latest line's age. A member that is absent or not an integer counts 0.
ProgressAge AgeOf(const api::WorkerStatus& w);

// Per job with a line among `workers`: the worker whose latest line is newest
// (ties: the lowest rank). Workers without a line are skipped. The pointers
// point into `workers`.
std::map<api::JobId, const api::WorkerStatus*> NewestProgressPerJob(
    const std::vector<api::WorkerStatus>& workers);

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_PROGRESS_SUMMARY_H_
