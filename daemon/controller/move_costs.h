// MoveCosts: what moving a running train job costs, measured on its own
// re-forms, for the share policy's move decisions (AllocJob::move_cost_s).
//
// A re-form (a shrink for a waiting job, a growth onto free devices, the
// survivors of a lost node) pauses training from the order until a rank of
// the re-formed world completes a step past the newest step completed before
// the order. That pause, less one step at the new plan's predicted pace (the
// step would have taken that long anyway), is the move's cost: rendezvous,
// state handed to joining ranks, warm-up. (Re-formed ranks keep their state,
// so no step is redone.) A job is charged its own latest measured cost, else
// the mean of every measured move in this controller's life, else the
// configured cost.
//
// Pure: the caller supplies the times. Thread safety: not thread-safe; the
// controller's mutex guards it.
#ifndef TESSERA_DAEMON_CONTROLLER_MOVE_COSTS_H_
#define TESSERA_DAEMON_CONTROLLER_MOVE_COSTS_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "api/types.h"

namespace tessera::daemon {

class MoveCosts {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // REQUIRES: configured_s >= 0.
  explicit MoveCosts(double configured_s) : configured_s_(configured_s) {}

  // A rank of `job` completed `step` in world `generation` (its progress
  // line's; nullopt when the line names none), reported by a beat that
  // arrived at `at`. Ends an open measurement once the re-formed world made
  // the step: a step of its generation or a later one, or, for a line without
  // one, a step past the newest before the order (a report naming no world
  // may carry steps the old world made before it, delivered after: only a
  // worker that names its generation is timed exactly). Returns the cost in
  // seconds then, nullopt otherwise.
  std::optional<double> Stepped(api::JobId job, int64_t step, std::optional<int64_t> generation,
                                TimePoint at);

  // A re-form of `job` into world `generation` was ordered at `at`; `step_s`
  // is the new plan's predicted step. A measurement still open is replaced
  // (the world it measured never stepped). REQUIRES: step_s >= 0.
  void Begin(api::JobId job, int64_t generation, double step_s, TimePoint at);

  // The job ended or left its attempt: its open measurement and newest step
  // go; its measured cost stays in the mean.
  void Forget(api::JobId job);

  struct Charge {
    double seconds = 0;
    std::string basis;  // "measured at its last re-form", "...", "configured"
  };
  Charge For(api::JobId job) const;
  // What a restart of `job` costs (a move onto none of its devices: every
  // rank stops, saving a checkpoint, and starts again): not measured, so
  // For(job), but never less than the configured cost (a re-form can measure
  // near 0 s; a restart never costs that little).
  Charge ForRestart(api::JobId job) const;

 private:
  struct Open {
    int64_t step = 0;  // the newest completed step at the order
    int64_t generation = 0;
    double step_s = 0;
    TimePoint at;
  };
  double configured_s_;
  std::map<api::JobId, int64_t> newest_;
  std::map<api::JobId, Open> open_;
  std::map<api::JobId, double> measured_;  // the job's latest
  double total_s_ = 0;                     // every measured move
  int64_t count_ = 0;
};

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_CONTROLLER_MOVE_COSTS_H_
