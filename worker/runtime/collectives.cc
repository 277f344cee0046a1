#include "worker/runtime/collectives.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <torch/version.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "worker/runtime/await_work.h"

namespace tessera::worker {
namespace {

// What the Gloo and NCCL groups are: c10d::ProcessGroup in LibTorch 1.x; from 2.0
// they derive from c10d::Backend (a ProcessGroup wraps backends), which has the same
// collective calls.
#if TORCH_VERSION_MAJOR >= 2
using C10dGroup = c10d::Backend;
#else
using C10dGroup = c10d::ProcessGroup;
#endif

std::atomic<bool> g_peer_lost{false};

// c10 errors carry a stack trace after the first line. Every failed operation
// of a connected group passes here: it marks the peer loss.
std::string FirstLine(const std::string& what) { return MarkPeerLost(what); }

class DoneWork : public CommWork {
 public:
  explicit DoneWork(Status s = Status::Ok()) : s_(std::move(s)) {}
  Status Wait() override { return s_; }

 private:
  Status s_;
};

// A world of one rank. Its collectives have no peer to wait for, but a rank
// alone is told to re-form (to grow) as any other is: once the watcher
// abandoned the collectives, each fails as an abandoned one does, so the
// trainer leaves its world at the step's end and takes the order.
class LocalCollectives : public Collectives {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::unique_ptr<CommWork> AllReduceSumAsync(std::vector<torch::Tensor>) override {
    return std::make_unique<DoneWork>(IfAbandoned("allreduce"));
  }
  Status Broadcast(std::vector<torch::Tensor>, int) override { return IfAbandoned("broadcast"); }
  Status Barrier() override { return IfAbandoned("barrier"); }
  std::unique_ptr<CommWork> SendAsync(std::vector<torch::Tensor>, int, int) override {
    return std::make_unique<DoneWork>(FailedPrecondition("send in a group of one"));
  }
  Status Recv(std::vector<torch::Tensor>, int, int) override {
    return FailedPrecondition("recv in a group of one");
  }
  Status StoreSet(const std::string& key, const std::string& value) override {
    kv_[key] = value;
    return Status::Ok();
  }
  Result<std::string> StoreGet(const std::string& key) override {
    auto it = kv_.find(key);
    if (it == kv_.end()) return NotFound("no key " + key);
    return it->second;
  }

 private:
  static Status IfAbandoned(const std::string& what) {
    return CollectivesAbandoned() ? AbandonedStatus(what) : Status::Ok();
  }

  std::map<std::string, std::string> kv_;
};

class C10dCollectives : public Collectives {
 public:
  C10dCollectives(c10::intrusive_ptr<C10dGroup> pg, c10::intrusive_ptr<c10d::Store> store,
                  const ConnectOptions& options, std::string name)
      : pg_(std::move(pg)),
        store_(std::move(store)),
        timeout_(options.op_timeout),
        ignore_tags_(options.ignore_p2p_tags),
        name_(std::move(name)) {
    if (!options.p2p_trace.empty()) trace_ = std::fopen(options.p2p_trace.c_str(), "a");
  }
  ~C10dCollectives() override {
    if (trace_ != nullptr) std::fclose(trace_);
    // After a peer loss the group is abandoned, not destroyed: destroying it
    // waits for its operations to time out, and its Gloo transport may hold the
    // locks of a thread the transport guard parked (transport_guard.h), which
    // it would wait for forever.
    if (PeerLost()) (void)pg_.release();
  }
  C10dCollectives(const C10dCollectives&) = delete;
  C10dCollectives& operator=(const C10dCollectives&) = delete;
  int rank() const override { return pg_->getRank(); }
  int size() const override { return pg_->getSize(); }

  std::unique_ptr<CommWork> AllReduceSumAsync(std::vector<torch::Tensor> tensors) override {
    try {
      // c10d's tensor list means one tensor per device, so each tensor of
      // ours is its own all-reduce (issued in order on every rank).
      std::vector<c10::intrusive_ptr<c10d::Work>> works;
      for (auto& t : tensors) {
        std::vector<torch::Tensor> one{t};
        c10d::AllreduceOptions opts;
        opts.reduceOp = c10d::ReduceOp::SUM;
        works.push_back(pg_->allreduce(one, opts));
      }
      return std::make_unique<MultiWork>(std::move(works), std::move(tensors), timeout_,
                                         "allreduce");
    } catch (const std::exception& e) {
      return std::make_unique<DoneWork>(Unavailable("allreduce: " + FirstLine(e.what())));
    }
  }
  Status Broadcast(std::vector<torch::Tensor> tensors, int root) override {
    try {
      // Gloo broadcasts one tensor per call on CPU.
      for (auto& t : tensors) {
        std::vector<torch::Tensor> one{t};
        c10d::BroadcastOptions opts;
        opts.rootRank = root;
        TESSERA_RETURN_IF_ERROR(Await(pg_->broadcast(one, opts), "broadcast"));
      }
      return Status::Ok();
    } catch (const std::exception& e) {
      return Unavailable(std::string("broadcast: ") + FirstLine(e.what()));
    }
  }
  Status Barrier() override {
    try {
      return Await(pg_->barrier(), "barrier");
    } catch (const std::exception& e) {
      return Unavailable(std::string("barrier: ") + FirstLine(e.what()));
    }
  }
  std::unique_ptr<CommWork> SendAsync(std::vector<torch::Tensor> tensors, int dst,
                                      int tag) override {
    try {
      std::vector<c10::intrusive_ptr<c10d::Work>> works;
      for (auto& t : tensors) {
        std::vector<torch::Tensor> one{t};
        Trace("send", dst, t);
        works.push_back(pg_->send(one, dst, ignore_tags_ ? 0 : tag));
      }
      return std::make_unique<MultiWork>(std::move(works), std::move(tensors), timeout_, "send");
    } catch (const std::exception& e) {
      return std::make_unique<DoneWork>(Unavailable(std::string("send: ") + FirstLine(e.what())));
    }
  }
  Status Recv(std::vector<torch::Tensor> tensors, int src, int tag) override {
    try {
      for (auto& t : tensors) {
        std::vector<torch::Tensor> one{t};
        Trace("recv", src, t);
        TESSERA_RETURN_IF_ERROR(Await(pg_->recv(one, src, ignore_tags_ ? 0 : tag), "recv"));
      }
      return Status::Ok();
    } catch (const std::exception& e) {
      return Unavailable(std::string("recv: ") + FirstLine(e.what()));
    }
  }
  Status StoreSet(const std::string& key, const std::string& value) override {
    try {
      store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
      return Status::Ok();
    } catch (const std::exception& e) {
      return Unavailable(std::string("store set: ") + FirstLine(e.what()));
    }
  }
  Result<std::string> StoreGet(const std::string& key) override {
    try {
      auto v = store_->get(key);
      return std::string(v.begin(), v.end());
    } catch (const std::exception& e) {
      return Unavailable(std::string("store get ") + key + ": " + FirstLine(e.what()));
    }
  }

 private:
  class MultiWork : public CommWork {
   public:
    MultiWork(std::vector<c10::intrusive_ptr<c10d::Work>> works, std::vector<torch::Tensor> keep,
              std::chrono::milliseconds timeout, std::string what)
        : works_(std::move(works)),
          keep_(std::move(keep)),
          timeout_(timeout),
          what_(std::move(what)) {}
    Status Wait() override {
      Status first;
      for (auto& w : works_) {
        Status s = AwaitWork(*w, timeout_, what_);
        if (!s.ok() && first.ok()) first = s;
        if (!s.ok()) break;
      }
      works_.clear();
      keep_.clear();
      return first;
    }

   private:
    std::vector<c10::intrusive_ptr<c10d::Work>> works_;
    std::vector<torch::Tensor> keep_;  // buffers must outlive the operation
    std::chrono::milliseconds timeout_;
    std::string what_;
  };

  // Waits for one operation of this group (every backend: await_work.h).
  Status Await(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what) {
    return AwaitWork(*work, timeout_, what);
  }

  void Trace(const char* op, int peer, const torch::Tensor& t) {
    if (trace_ == nullptr) return;
    std::fprintf(trace_, "%s %s %d %lld\n", name_.c_str(), op, peer,
                 static_cast<long long>(t.numel()));
    std::fflush(trace_);
  }

  c10::intrusive_ptr<C10dGroup> pg_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  bool ignore_tags_ = false;
  std::string name_;
  std::FILE* trace_ = nullptr;
};

Result<c10::intrusive_ptr<C10dGroup>> MakeProcessGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                                       int rank, int size,
                                                       const ConnectOptions& opt) {
  try {
    // PyTorch's flight recorder (a trace of every collective, which Tessera
    // does not read) adds a process group it has not seen to a map outside
    // its lock, so two groups recording at once in one process (a plan's
    // stage groups, or ranks as threads in the tests) race, and can crash
    // (seen in GradReducerTest, about 1 run in 40). Off unless the user set it.
    ::setenv("TORCH_FR_BUFFER_SIZE", "0", /*overwrite=*/0);
    if (opt.backend == Backend::kNccl) {
      // A failed or timed-out NCCL operation throws in the rank's own wait (which
      // blocks the host) instead of the watchdog aborting the process, so the rank
      // exits with the peer-lost code. A value the user set is kept.
      ::setenv("TORCH_NCCL_BLOCKING_WAIT", "1", /*overwrite=*/0);
      ::setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0", /*overwrite=*/0);
      auto o = c10d::ProcessGroupNCCL::Options::create();
      o->timeout = opt.op_timeout;
      return c10::intrusive_ptr<C10dGroup>(
          c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, o));
    }
    auto o = c10d::ProcessGroupGloo::Options::create(opt.op_timeout);
    if (!opt.gloo_host.empty()) {
      o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(opt.gloo_host));
    } else if (!opt.gloo_interface.empty()) {
      o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(opt.gloo_interface));
    } else {
      o->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    return c10::intrusive_ptr<C10dGroup>(
        c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, o));
  } catch (const std::exception& e) {
    return Unavailable(std::string("process group setup failed: ") + FirstLine(e.what()));
  }
}

// This host's address on the route to host:port: the source address the
// kernel picks for a UDP socket connected there (connect sends nothing).
// Empty when the host does not resolve or no route leads there.
std::string LocalAddressToward(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return "";
  std::string local;
  for (addrinfo* a = found; a != nullptr && local.empty(); a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    sockaddr_storage self{};
    socklen_t len = sizeof(self);
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) == 0) {
      char text[INET6_ADDRSTRLEN] = {};
      const void* ip =
          self.ss_family == AF_INET6
              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&self)->sin6_addr)
              : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&self)->sin_addr);
      if (::inet_ntop(self.ss_family, ip, text, sizeof(text)) != nullptr) local = text;
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return local;
}

// Waits until something accepts connections at host:port (rank 0's store),
// trying every 20 ms: a rank that starts before rank 0 listens would
// otherwise sit in the store client's one-second connect retry. Gives up
// silently at the deadline (the store client then reports the failure).
void AwaitListener(const std::string& host, int port, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  while (std::chrono::steady_clock::now() < deadline) {
    addrinfo* found = nullptr;
    bool up = false;
    if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) == 0) {
      for (addrinfo* a = found; a != nullptr && !up; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        up = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0;
        ::close(fd);
      }
      ::freeaddrinfo(found);
    }
    if (up) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

class C10dWorld : public World {
 public:
  C10dWorld(c10::intrusive_ptr<c10d::Store> store, std::unique_ptr<Collectives> world, int rank,
            ConnectOptions options)
      : store_(std::move(store)), world_(std::move(world)), rank_(rank), options_(options) {}
  Collectives& world() override { return *world_; }
  Result<std::unique_ptr<Collectives>> NewGroup(const std::string& name,
                                                const std::vector<int>& ranks) override {
    int group_rank = -1;
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i] == rank_) group_rank = static_cast<int>(i);
    }
    if (group_rank < 0) return InvalidArgument("rank is not a member of group " + name);
    if (ranks.size() == 1) return MakeLocalCollectives();
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("group/" + name, store_);
    TESSERA_ASSIGN_OR_RETURN(
        auto pg, MakeProcessGroup(prefixed, group_rank, static_cast<int>(ranks.size()), options_));
    return std::unique_ptr<Collectives>(
        std::make_unique<C10dCollectives>(std::move(pg), store_, options_, name));
  }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  std::unique_ptr<Collectives> world_;
  int rank_;
  ConnectOptions options_;
};

class LocalWorld : public World {
 public:
  LocalWorld() : world_(MakeLocalCollectives()) {}
  Collectives& world() override { return *world_; }
  Result<std::unique_ptr<Collectives>> NewGroup(const std::string&,
                                                const std::vector<int>&) override {
    return MakeLocalCollectives();
  }

 private:
  std::unique_ptr<Collectives> world_;
};

}  // namespace

std::unique_ptr<Collectives> MakeLocalCollectives() { return std::make_unique<LocalCollectives>(); }

std::unique_ptr<World> MakeLocalWorld() { return std::make_unique<LocalWorld>(); }

bool PeerLost() { return g_peer_lost.load(); }
void ClearPeerLost() { g_peer_lost.store(false); }

std::string MarkPeerLost(const std::string& error_text) {
  g_peer_lost.store(true);
  return error_text.substr(0, error_text.find('\n'));
}

Result<Backend> BackendForDevice(const std::string& device) {
  if (device.empty() || device == "cpu" || device.rfind("cpu:", 0) == 0) return Backend::kGloo;
  if (device.rfind("cuda", 0) == 0) {
    return Backend::kNccl;
  }
  return InvalidArgument("unknown device \"" + device + "\"", "TESSERA_DEVICE");
}

Result<std::unique_ptr<World>> ConnectWorld(const DistEnv& env, ConnectOptions options) {
  if (options.gloo_host.empty() && options.gloo_interface.empty()) {
    if (!env.gloo_socket_ifname.empty()) {
      options.gloo_interface = env.gloo_socket_ifname;
    } else if (env.master_addr == "localhost" || env.master_addr.rfind("127.", 0) == 0) {
      options.gloo_host = "127.0.0.1";
    } else {
      // Not the host name's address: it may be a loopback one (Debian's
      // 127.0.1.1) or absent where this rank runs (a network namespace).
      options.gloo_host = LocalAddressToward(env.master_addr, env.master_port);
    }
  }
  if (env.world_size > 1) {
    const std::string where = !options.gloo_host.empty() ? options.gloo_host
                              : !options.gloo_interface.empty()
                                  ? "interface " + options.gloo_interface
                                  : "the host name's address";
    std::fprintf(stderr, "rank %d: gloo on %s (MASTER_ADDR %s)\n", env.rank, where.c_str(),
                 env.master_addr.c_str());
  }
  if (env.rank != 0) AwaitListener(env.master_addr, env.master_port, options.store_timeout);
  c10::intrusive_ptr<c10d::Store> store;
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(env.master_port);
    so.isServer = env.rank == 0;
    so.numWorkers = static_cast<size_t>(env.world_size);
    so.waitWorkers = true;
    so.timeout = options.store_timeout;
    store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
  } catch (const std::exception& e) {
    const std::string what = e.what();  // c10's: the message, then its backtrace
    return Unavailable("rendezvous with " + env.master_addr + ":" +
                       std::to_string(env.master_port) +
                       " failed: " + what.substr(0, what.find('\n')));
  }
  auto world_store = c10::make_intrusive<c10d::PrefixStore>("world", store);
  TESSERA_ASSIGN_OR_RETURN(auto pg,
                           MakeProcessGroup(world_store, env.rank, env.world_size, options));
  auto world = std::make_unique<C10dCollectives>(std::move(pg), store, options, "world");
  return std::unique_ptr<World>(
      std::make_unique<C10dWorld>(store, std::move(world), env.rank, options));
}

}  // namespace tessera::worker
