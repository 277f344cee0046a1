// Reform: how the surviving ranks of a training attempt go on after a node is
// lost, without restarting (the trainer's caller side is trainer.cc).
//
// Steps, as a survivor sees them:
//   1. A collective fails because a peer vanished (PeerLost(), collectives.h).
//      The rank keeps its process, its model and its optimizer state, writes
//      a "peer_lost" progress line (the controller then checks the other
//      nodes at once), and waits for its re-formed place.
//   2. The controller re-plans the job on the survivors' devices and hands
//      each survivor a ReformOrder through its agent, which writes it to the
//      rank's TESSERA_REFORM_FILE (api/agent_protocol.h WorkerLaunch::reform).
//      A ReformWatcher sees a newer generation within ~20 ms and abandons the
//      collectives still blocked (await_work.h), so a survivor that did not
//      notice the loss itself stops waiting too. A running rank the new plan
//      leaves out is handed a left-out order of the same generation: it
//      abandons its collectives the same way and exits 0 at once (its state
//      lives on in the kept ranks), freeing its device for another job.
//   3. The rank leaves its old groups (they are abandoned, not destroyed:
//      destroying a Gloo group waits for operations blocked on the dead peer)
//      and connects the new world: a fresh TCPStore at the order's
//      MASTER_ADDR:MASTER_PORT, new groups from the new plan.
//   4. AgreeOnState: every rank says which layers it holds at which completed
//      step; the newest step among them is the one training continues from
//      (a step in flight is redone, no completed step is), and every layer a
//      rank's new stage needs but it does not hold at that step comes from
//      the rank holding it at the newest step (the lowest such rank; params,
//      buffers and optimizer state, sent point to point). A layer no survivor
//      holds (a pipeline stage that was only on the lost node) is loaded from
//      the newest complete checkpoint by the ranks that take it: those layers
//      go back to that checkpoint's step, the others keep theirs. A checkpoint
//      without them makes re-forming fail (kFailedPrecondition naming the
//      layer); the controller then restarts the attempt.
//
// Thread safety: ReformWatcher's methods may be called from any thread; the
// pure functions are values; SyncReformedState runs on the rank's own thread
// like every collective.
#ifndef TESSERA_WORKER_RUNTIME_REFORM_H_
#define TESSERA_WORKER_RUNTIME_REFORM_H_

#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "worker/model/layered_model.h"
#include "worker/runtime/collectives.h"
#include "worker/runtime/dist_env.h"

namespace tessera::worker {

// A rank's place in its re-formed attempt (reform.json), or that it has none:
// {"generation": G, "left_out": true} tells a rank the planned re-form to G
// left it out (its state lives on in the kept ranks), so it leaves at once
// instead of waiting, blocked in a collective of the world the others left,
// for its agent's stop to run out of grace.
struct ReformOrder {
  int64_t generation = 0;
  bool left_out = false;                   // no place in generation G: env and plan empty
  std::map<std::string, std::string> env;  // RANK, WORLD_SIZE, MASTER_ADDR, ...
  std::string plan_text;                   // the new rank plan (plan.h ParsePlan)
};

// kInvalidArgument naming the field for a malformed order (a left-out order
// needs no env or plan).
Result<ReformOrder> ParseReformOrder(const std::string& text);

// The order in the file at `path`; nullopt when there is none (no file, or one
// that does not parse: agents write it atomically, so a bad one stays bad).
std::optional<ReformOrder> ReadReformOrder(const std::string& path);

// `env` with the order's variables (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) applied; ReadDistEnv's
// errors for bad values.
Result<DistEnv> ReformedEnv(const DistEnv& env, const ReformOrder& order);

// Polls a reform file every 20 ms on a thread of its own, and calls
// AbandonCollectives() when a generation newer than the current one appears.
class ReformWatcher {
 public:
  // An empty path watches nothing (Await answers nullopt at once). `current`:
  // the generation the rank starts in (a joining rank's), set before the
  // thread first reads the file, so the order that made it is never taken
  // for a newer one.
  explicit ReformWatcher(std::string path, int64_t current = 0);
  ~ReformWatcher();
  ReformWatcher(const ReformWatcher&) = delete;
  ReformWatcher& operator=(const ReformWatcher&) = delete;

  bool enabled() const { return !path_.empty(); }
  // The generation the rank runs now; orders up to it are old.
  void SetCurrent(int64_t generation) EXCLUDES(mu_);
  // Blocks until an order newer than the current generation arrives, `stop`
  // is set, or `timeout` passes.
  std::optional<ReformOrder> Await(std::chrono::milliseconds timeout, const std::atomic<bool>& stop)
      EXCLUDES(mu_);

 private:
  void Loop() EXCLUDES(mu_);
  std::optional<ReformOrder> ReadNewer() EXCLUDES(mu_);

  const std::string path_;
  Mutex mu_;
  int64_t current_ GUARDED_BY(mu_) = 0;
  std::pair<int64_t, int64_t> seen_ GUARDED_BY(mu_){-1, -1};  // the file's inode, mtime
  std::optional<ReformOrder> newest_ GUARDED_BY(mu_);
  std::atomic<bool> quit_{false};
  std::thread thread_;
};

// What a rank holds when its world re-forms: the layers of its last stage,
// complete at `step`; nothing (begin == end) for a rank that joins (a new
// process on a device the attempt gained: it gets all from its peers).
struct HeldLayers {
  int64_t step = 0;
  int64_t layer_begin = 0;
  int64_t layer_end = 0;
  int64_t samples = 0;  // samples seen at `step` (the data order goes on from there)
};

struct LayerTransfer {
  int64_t layer = 0;
  int src = 0;  // new world ranks; kFromCheckpoint: no survivor holds it
  int dst = 0;
};
inline constexpr int kFromCheckpoint = -1;

struct ReformAgreement {
  int64_t step = 0;                      // training continues after this step
  int64_t samples = 0;                   // samples seen at it (the lowest holder's)
  std::vector<LayerTransfer> transfers;  // in the order every rank runs them
};

// Pure. held[r] and need[r] (the half-open layers of rank r's new stage) by
// new world rank. The step is the newest held. A rank lacking a layer (or
// holding it at an older step) gets it from the rank holding it at the newest
// step, lowest first; from kFromCheckpoint when no rank holds it.
Result<ReformAgreement> AgreeOnState(const std::vector<HeldLayers>& held,
                                     const std::vector<std::pair<int64_t, int64_t>>& need);

// Step 4 on the new world: shares every rank's HeldLayers and new stage over
// the store, runs the transfers (parameters and buffers into the model,
// "<param>#<slot>" optimizer tensors into *optimizer_state; layers from the
// checkpoint out of `checkpoint_dir`), and returns the agreement. comm_device:
// where the group's tensors live (CPU for Gloo).
Result<ReformAgreement> SyncReformedState(Collectives& world, const HeldLayers& mine,
                                          std::pair<int64_t, int64_t> need, LayeredModel& model,
                                          std::map<std::string, torch::Tensor>* optimizer_state,
                                          torch::Device comm_device,
                                          const std::string& checkpoint_dir);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_REFORM_H_
