// End to end: two nodes whose inventories declare a network link. tesserad
// shows the link of each node (GET /api/v1/nodes), and with network
// namespaces the harness shapes each node's veth so the link costs what it
// declares: a TCP handshake between the two namespaces takes at least the
// declared latency, a transfer at most the declared bandwidth.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <thread>

#include "tests/integration/harness.h"

namespace tessera::testing {
namespace {
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr double kBandwidthBytesPerS = 20e6 / 8;  // 20Mbit
constexpr double kLatencyS = 0.005;               // 5ms
const std::string kInventory = InventoryYaml({{1, "T4 (emulated)", "16GiB", 0.25}},
                                             "network: {bandwidth: 20Mbit, latency: 5ms}");

// Moves the calling thread into the network namespace at `path`.
Status EnterNamespace(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FailedPrecondition("cannot open " + path);
  const int rc = ::setns(fd, CLONE_NEWNET);
  ::close(fd);
  if (rc != 0) return FailedPrecondition("setns " + path + " failed");
  return Status::Ok();
}

// A socket whose reads and writes give up after 5 s, so a broken link fails
// the test instead of hanging it.
int Socket() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

struct LinkTimes {
  double handshake_s = 1e9;  // the fastest TCP connect: one round trip
  double transfer_s = 0;     // `bytes` sent and acknowledged by the receiver
};

// From a thread in the namespace `from_ns`, connects `connections` times to
// a receiver in `to_ns` at `to_address`, and sends `bytes` on the last
// connection; the receiver answers one byte once it has read everything.
Result<LinkTimes> MeasureLink(const std::string& from_ns, const std::string& to_ns,
                              const std::string& to_address, size_t bytes, int connections) {
  std::promise<Result<uint16_t>> port_promise;
  auto port_future = port_promise.get_future();
  std::thread receiver([&] {
    if (Status s = EnterNamespace(to_ns); !s.ok()) return port_promise.set_value(s);
    int listener = Socket();
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    ::inet_pton(AF_INET, to_address.c_str(), &addr.sin_addr);
    socklen_t len = sizeof addr;
    if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listener, 8) != 0 ||
        ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ::close(listener);
      return port_promise.set_value(FailedPrecondition("cannot listen on " + to_address));
    }
    port_promise.set_value(ntohs(addr.sin_port));
    std::vector<char> buf(64 * 1024);
    for (int i = 0; i < connections; ++i) {
      pollfd p{listener, POLLIN, 0};
      if (::poll(&p, 1, 10'000) != 1) break;
      int conn = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) break;
      while (::read(conn, buf.data(), buf.size()) > 0) {
      }
      (void)::write(conn, "k", 1);
      ::close(conn);
    }
    ::close(listener);
  });
  Result<uint16_t> port = port_future.get();
  if (!port.ok()) {
    receiver.join();
    return port.status();
  }
  std::promise<Result<LinkTimes>> times_promise;
  std::thread sender([&] {
    if (Status s = EnterNamespace(from_ns); !s.ok()) return times_promise.set_value(s);
    LinkTimes times;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(*port);
    ::inet_pton(AF_INET, to_address.c_str(), &addr.sin_addr);
    const std::vector<char> payload(bytes, 'x');
    for (int i = 0; i < connections; ++i) {
      int fd = Socket();
      const auto start = Clock::now();
      if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        return times_promise.set_value(FailedPrecondition("connect to " + to_address + " failed"));
      }
      const auto connected = Clock::now();
      times.handshake_s =
          std::min(times.handshake_s, std::chrono::duration<double>(connected - start).count());
      size_t sent = 0;
      const size_t want = i + 1 == connections ? bytes : 0;
      while (sent < want) {
        ssize_t n = ::write(fd, payload.data() + sent, want - sent);
        if (n <= 0) break;
        sent += static_cast<size_t>(n);
      }
      ::shutdown(fd, SHUT_WR);
      char ack = 0;
      const bool acked = ::read(fd, &ack, 1) == 1;
      const auto done = Clock::now();
      ::close(fd);
      if (sent != want || !acked) {
        return times_promise.set_value(FailedPrecondition("transfer to " + to_address + " failed"));
      }
      if (want > 0) times.transfer_s = std::chrono::duration<double>(done - connected).count();
    }
    times_promise.set_value(times);
  });
  sender.join();
  receiver.join();
  return times_promise.get_future().get();
}

TEST(NetworkE2ETest, DeclaredLinksAreReportedAndShaped) {
  Cluster cluster("network");
  cluster.StartController();
  for (const char* node : {"boxa", "boxb"})
    cluster.StartAgent(node, kInventory, {"--no-benchmark"});

  // (a) tesserad keeps each node's declared link.
  api::Json nodes;
  const bool reported = WaitFor(
      [&] {
        nodes = cluster.GetJson("/api/v1/nodes");
        if (!nodes.is_object() || !nodes.contains("nodes") || nodes["nodes"].size() != 2) {
          return false;
        }
        for (const auto& n : nodes["nodes"]) {
          if (!n.contains("network") || !n["network"].is_object()) return false;
        }
        return true;
      },
      20s);
  ASSERT_TRUE(reported) << nodes.dump() << "\n" << cluster.agent("boxa")->Log();
  for (const auto& n : nodes["nodes"]) {
    EXPECT_DOUBLE_EQ(n["network"]["bandwidth_bytes_per_s"].get<double>(), kBandwidthBytesPerS)
        << n.dump();
    EXPECT_DOUBLE_EQ(n["network"]["latency_s"].get<double>(), kLatencyS) << n.dump();
  }

  // (b) the links are shaped: only between namespaces.
  if (!cluster.namespaces()) {
    GTEST_SKIP() << "links are shaped only when nodes run in network namespaces (root with "
                    "`ip` and `tc`); this run is on loopback: "
                 << cluster.link_shaping_note();
  }
  if (cluster.link_shaping() == NetworkLab::Shaping::kNone) {
    GTEST_SKIP() << "this machine cannot shape links: " << cluster.link_shaping_note();
  }
  constexpr size_t kBytes = 256 * 1024;
  auto times = MeasureLink("/run/netns/" + cluster.node_netns("boxa"),
                           "/run/netns/" + cluster.node_netns("boxb"), cluster.node_address("boxb"),
                           kBytes, 3);
  ASSERT_TRUE(times.ok()) << times.status().ToString();
  std::fprintf(stderr,
               "[ network  ] boxa -> boxb: handshake %.2f ms, %zu KiB in %.3f s (%.2f Mbit/s)\n",
               times->handshake_s * 1e3, kBytes / 1024, times->transfer_s,
               kBytes * 8 / times->transfer_s / 1e6);
  // Unshaped veths move 256 KiB in about a millisecond; at 20 Mbit/s it takes
  // 0.1 s (tbf lets a first burst of 32 KiB through at once).
  EXPECT_GE(times->transfer_s, 0.5 * kBytes / kBandwidthBytesPerS);
  if (cluster.link_shaping() == NetworkLab::Shaping::kRateOnly) {
    std::fprintf(stderr, "[ network  ] latency not checked: links are shaped by rate only (%s)\n",
                 cluster.link_shaping_note().c_str());
    return;
  }
  // A round trip crosses each node's link twice (latency/2 at every end):
  // 2 x 5 ms. Unshaped, it takes well under a millisecond.
  EXPECT_GE(times->handshake_s, kLatencyS);
}

}  // namespace
}  // namespace tessera::testing
