// JobAdmission: what a submitted job must pass, beyond ValidateJobSpec, before
// it is queued: the rules of this deployment.
//
// - Entrypoint policy (api::EntrypointPolicy, tesserad's `entrypoints`):
//   a user's env keys must match the entrypoint's env_allow and a user's args
//   to a cmd: entrypoint its args_allow (or it has free_args). "*" is the
//   policy of entrypoints without their own. Admins are not bound by these
//   lists (they may change the entrypoints themselves); the global env deny
//   list and builtin options (ValidateJobSpec) bind everyone.
// - A job's own checkpoints: a `checkpoint` in the folder of a job's
//   checkpoints, <checkpoint_root>/job-N (or below it, resolved as data
//   roots resolve paths), is readable by job N's owner (and admins) without
//   a data root, so a user runs an infer job from what their own train job
//   saved, and no one else's. Other checkpoints follow the data roots.
// - Data roots (daemon/data_roots.h): `dataset` and `checkpoint` (must exist)
//   under a root the owner may read, `output` under one it may write; an
//   infer job's list file has its first kListItemsChecked items checked too
//   (daemon/controller/infer_input.h); the listing checks every item before the job
//   starts and fails it, naming the line, on a bad one.
//
// Errors: kInvalidArgument naming the field ("env.KEY", "args[i]",
// "dataset", ...). The checks run again where the controller itself reads
// an input (InputCheckFor), since a path can change after submission.
// Thread safety: immutable; Check may be called concurrently.
#ifndef TESSERA_DAEMON_CONTROLLER_JOB_ADMISSION_H_
#define TESSERA_DAEMON_CONTROLLER_JOB_ADMISSION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "api/job_spec_validation.h"
#include "api/types.h"
#include "common/status.h"
#include "daemon/controller/infer_input.h"
#include "daemon/data_roots.h"
#include "daemon/store/store.h"

namespace tessera::daemon {

class JobAdmission {
 public:
  // Items of a list file checked at submission (a 0.06-0.15 s submit with data
  // roots in bench/cluster/listing_bench).
  static constexpr int64_t kListItemsChecked = 10'000;

  // checkpoint_root: where jobs checkpoint (job-<id>/ each); "" grants no
  // job's checkpoints beyond the data roots.
  JobAdmission(DataRoots roots, std::map<std::string, api::EntrypointPolicy> entrypoints,
               std::string checkpoint_root = "");

  // A job's owner, or an error when there is no such job.
  using JobOwnerFn = std::function<Result<std::string>(api::JobId)>;

  // REQUIRES: spec passed ValidateJobSpec. owner_of: looks up the job whose
  // checkpoints `spec.checkpoint` names (without it, data roots only).
  Status Check(const api::Principal& who, const api::JobSpec& spec,
               const JobOwnerFn& owner_of = {}) const;

  // The policy for `entrypoint`: its own entry, else "*", else empty.
  api::EntrypointPolicy PolicyFor(const std::string& entrypoint) const;

  const DataRoots& roots() const { return roots_; }

  // What the listing of an infer job's input may read (daemon/controller/infer_input.h):
  // paths under the roots `owner` may read, `owner` counting as an admin
  // while they hold an unrevoked admin token. The check holds a pointer to
  // this admission (which must outlive it) and is safe to call from any
  // thread.
  Result<InputPathCheck> InputCheckFor(Store* store, const std::string& owner) const;

 private:
  // Whether `path` lies in the checkpoints of a job `who` owns (any job for
  // admins).
  bool InOwnJobsCheckpoints(const api::Principal& who, const std::string& path,
                            const JobOwnerFn& owner_of) const;

  const DataRoots roots_;
  const std::map<std::string, api::EntrypointPolicy> entrypoints_;
  const std::string checkpoint_root_;
};

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_CONTROLLER_JOB_ADMISSION_H_
