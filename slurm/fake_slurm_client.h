// FakeSlurmClient: an in-memory Slurm for unit tests, with fault injection.
// Nodes are whatever the test sets; a submitted job gets one record per
// component (consecutive ids, the first is the leader), PENDING until the
// test moves it (SetState); CancelJob marks every component CANCELLED.
// FailNext(op, status) makes the next call of that operation fail.
//
// Thread safety: every method may be called concurrently (one mutex).
#ifndef TESSERA_SLURM_FAKE_SLURM_CLIENT_H_
#define TESSERA_SLURM_FAKE_SLURM_CLIENT_H_

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "slurm/slurm_client.h"

namespace tessera::slurm {

class FakeSlurmClient : public SlurmClient {
 public:
  enum class Op { kListNodes, kSubmit, kGetJob, kListJobs, kCancel };

  void SetNodes(std::vector<SlurmNode> nodes) {
    std::lock_guard lock(mu_);
    nodes_ = std::move(nodes);
  }
  void SetNodeState(const std::string& name, const std::string& state) {
    std::lock_guard lock(mu_);
    for (SlurmNode& n : nodes_) {
      if (n.name == name) n.state = state;
    }
  }
  void FailNext(Op op, Status status) {
    std::lock_guard lock(mu_);
    failures_[op] = std::move(status);
  }
  // Moves every component of the job led by `leader`.
  void SetState(int64_t leader, const std::string& state, int64_t exit_code = 0) {
    std::lock_guard lock(mu_);
    for (SlurmJob& j : jobs_) {
      if (j.het_job_id == leader) {
        j.state = state;
        j.exit_code = exit_code;
      }
    }
  }
  std::vector<HetJobRequest> submitted() const {
    std::lock_guard lock(mu_);
    return submitted_;
  }
  std::vector<int64_t> cancelled() const {
    std::lock_guard lock(mu_);
    return cancelled_;
  }

  Result<std::vector<SlurmNode>> ListNodes() override {
    std::lock_guard lock(mu_);
    TESSERA_RETURN_IF_ERROR(Take(Op::kListNodes));
    return nodes_;
  }
  Result<int64_t> SubmitHetJob(const HetJobRequest& request) override {
    std::lock_guard lock(mu_);
    TESSERA_RETURN_IF_ERROR(Take(Op::kSubmit));
    if (request.components.empty()) return InvalidArgument("a job needs a component", "components");
    submitted_.push_back(request);
    const int64_t leader = next_id_;
    for (size_t i = 0; i < request.components.size(); ++i) {
      SlurmJob j;
      j.job_id = next_id_++;
      j.het_job_id = leader;
      j.het_job_offset = static_cast<int64_t>(i);
      j.name = request.name;
      j.state = "PENDING";
      jobs_.push_back(j);
    }
    return leader;
  }
  Result<std::vector<SlurmJob>> GetJob(int64_t job_id) override {
    std::lock_guard lock(mu_);
    TESSERA_RETURN_IF_ERROR(Take(Op::kGetJob));
    std::vector<SlurmJob> out;
    for (const SlurmJob& j : jobs_) {
      if (j.het_job_id == job_id) out.push_back(j);
    }
    if (out.empty()) return NotFound("Invalid job id specified");
    return out;
  }
  Result<std::vector<SlurmJob>> ListJobs() override {
    std::lock_guard lock(mu_);
    TESSERA_RETURN_IF_ERROR(Take(Op::kListJobs));
    return jobs_;
  }
  Status CancelJob(int64_t job_id) override {
    std::lock_guard lock(mu_);
    TESSERA_RETURN_IF_ERROR(Take(Op::kCancel));
    cancelled_.push_back(job_id);
    bool found = false;
    for (SlurmJob& j : jobs_) {
      if (j.het_job_id == job_id) {
        found = true;
        if (!IsTerminalJobState(j.state)) j.state = "CANCELLED";
      }
    }
    return found ? Status::Ok() : NotFound("Invalid job id specified");
  }

 private:
  Status Take(Op op) {
    auto it = failures_.find(op);
    if (it == failures_.end()) return Status::Ok();
    Status st = it->second;
    failures_.erase(it);
    return st;
  }

  mutable std::mutex mu_;
  std::vector<SlurmNode> nodes_;
  std::vector<SlurmJob> jobs_;
  std::vector<HetJobRequest> submitted_;
  std::vector<int64_t> cancelled_;
  std::map<Op, Status> failures_;
  int64_t next_id_ = 100;
};

}  // namespace tessera::slurm

#endif  // TESSERA_SLURM_FAKE_SLURM_CLIENT_H_
