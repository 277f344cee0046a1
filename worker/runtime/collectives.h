// Collectives: the communication the trainer needs (all-reduce, broadcast,
// barrier, point-to-point send/recv, a small key-value store), as an
// interface so trainer code can be driven by a real c10d process group or by
// the single-process implementation.
//
// C10dCollectives wraps a c10d::ProcessGroup (Gloo on CPU; NCCL when a CUDA
// LibTorch is compiled in and the device is CUDA). Process groups are built
// by ConnectWorld (TCPStore rendezvous at MASTER_ADDR:MASTER_PORT, rank 0
// hosts it) and World::NewGroup (PrefixStore per group; only members call it,
// in the same order on every member).
//
// Thread safety: async operations may be launched from the autograd thread;
// one thread at a time per Collectives object.
#ifndef TESSERA_WORKER_RUNTIME_COLLECTIVES_H_
#define TESSERA_WORKER_RUNTIME_COLLECTIVES_H_

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/runtime/dist_env.h"

namespace tessera::worker {

// An operation in flight. Wait() blocks until it is done.
class CommWork {
 public:
  virtual ~CommWork() = default;
  virtual Status Wait() = 0;
};

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place sum over the group. The tensors must stay alive until Wait().
  virtual std::unique_ptr<CommWork> AllReduceSumAsync(std::vector<torch::Tensor> tensors) = 0;
  Status AllReduceSum(std::vector<torch::Tensor> tensors) {
    return AllReduceSumAsync(std::move(tensors))->Wait();
  }
  virtual Status Broadcast(std::vector<torch::Tensor> tensors, int root) = 0;
  virtual Status Barrier() = 0;
  // Point-to-point: ranks are group ranks; `tag` matches sends to receives.
  virtual std::unique_ptr<CommWork> SendAsync(std::vector<torch::Tensor> tensors, int dst,
                                              int tag) = 0;
  // Receives into pre-shaped tensors.
  virtual Status Recv(std::vector<torch::Tensor> tensors, int src, int tag) = 0;
  // Key-value store shared by the job (rendezvous store).
  virtual Status StoreSet(const std::string& key, const std::string& value) = 0;
  virtual Result<std::string> StoreGet(const std::string& key) = 0;
};

// Group of one process: all-reduce and broadcast are identities, p2p is an
// error, the store is a local map.
std::unique_ptr<Collectives> MakeLocalCollectives();

enum class Backend { kGloo, kNccl };
// "gloo" for CPU devices; "nccl" for cuda devices (every build links a CUDA
// LibTorch; a node without a GPU fails when the group is made, with the reason).
Result<Backend> BackendForDevice(const std::string& device);

// The world process group plus what it takes to create sub-groups.
class World {
 public:
  virtual ~World() = default;
  virtual Collectives& world() = 0;
  // A new group over `ranks` (world ranks, in group-rank order). REQUIRES:
  // this rank is a member; every member calls with the same name and ranks.
  virtual Result<std::unique_ptr<Collectives>> NewGroup(const std::string& name,
                                                        const std::vector<int>& ranks) = 0;
};

struct ConnectOptions {
  std::chrono::milliseconds store_timeout{60'000};
  std::chrono::milliseconds op_timeout{300'000};
  Backend backend = Backend::kGloo;
  // Address Gloo binds to and announces to its peers. When empty, ConnectWorld
  // picks, in order: the interface named by GLOO_SOCKET_IFNAME; 127.0.0.1 when
  // MASTER_ADDR is a loopback address; otherwise this host's address on the
  // route to MASTER_ADDR (the interface that reaches the other nodes, which
  // the host name need not resolve to, e.g. inside a network namespace).
  std::string gloo_host;
  // Network interface Gloo binds to (set by ConnectWorld from
  // GLOO_SOCKET_IFNAME); used only when gloo_host is empty.
  std::string gloo_interface;
  // Test hooks (tessera-worker honours them only with TESSERA_WORKER_TEST_HOOKS=1):
  // p2p_trace appends one line per point-to-point operation to this file
  // ("<group> send|recv <peer> <elements>", in issue order); ignore_p2p_tags sends
  // every tag as 0, as NCCL does (it matches a pair's operations by order alone).
  std::string p2p_trace;
  bool ignore_p2p_tags = false;
};

// Rendezvous through the TCPStore (rank 0 hosts it) and build the world group.
Result<std::unique_ptr<World>> ConnectWorld(const DistEnv& env, ConnectOptions options);

// A world of size 1 over MakeLocalCollectives.
std::unique_ptr<World> MakeLocalWorld();

// Whether an operation of a connected c10d group or its store failed in this
// process (a peer's connection closed or reset, or the operation timed out):
// the worker then exits with api::kPeerLostExitCode, so the controller checks
// the peers' nodes at once instead of waiting out their heartbeat timeout.
// Thread safe.
bool PeerLost();
// Forgets the peer loss: the rank re-formed its world without the lost peer
// (worker/runtime/reform.h).
void ClearPeerLost();

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_COLLECTIVES_H_
