// AwaitWork: waits for a c10d operation until it has really finished, on every
// backend.
//
// c10d's Work::wait() blocks the calling thread for Gloo. For NCCL it only makes
// the current CUDA stream wait for the operation and returns at once (unless
// TORCH_NCCL_BLOCKING_WAIT is set), so a peer that died leaves the host running
// on, and the rank never notices the loss: the watchdog aborts the process
// minutes later instead of the rank exiting with the peer-lost code. AwaitWork
// calls wait() and then polls isCompleted() (a CUDA event query for NCCL; it
// sleeps between polls, so the host does not spin) until the operation is done
// or `timeout` has passed. A failure or a timeout marks the peer loss
// (PeerLost(), collectives.h) and returns kUnavailable naming `what`.
//
// Thread safety: any thread; one caller per Work.
#ifndef TESSERA_WORKER_RUNTIME_AWAIT_WORK_H_
#define TESSERA_WORKER_RUNTIME_AWAIT_WORK_H_

#include <chrono>
#include <string>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "common/status.h"

namespace tessera::worker {

Status AwaitWork(c10d::Work& work, std::chrono::milliseconds timeout, const std::string& what);

// Marks this process's peer loss (collectives.cc owns the flag) and returns the
// first line of a c10 error text (the rest is a stack trace).
std::string MarkPeerLost(const std::string& error_text);

// See the file comment. Thread safe.
void AbandonCollectives();
void ResumeCollectives();
bool CollectivesAbandoned();

// What an abandoned operation `what` returns ("allreduce abandoned: ..."),
// marking the peer loss the trainer re-forms on.
Status AbandonedStatus(const std::string& what);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_AWAIT_WORK_H_
