// NetworkLab: a private IPv4 network of Linux network namespaces, so that
// end-to-end tests run every node of a cluster behind its own network stack
// on one machine.
//
// Shape: one bridge in the test's own (root) namespace holds the subnet's
// first address (the "hub": tesserad listens there, and the test process
// reaches it there too); every node gets a namespace with `lo` up and one
// veth pair into the bridge, its end named eth0 with the next free address.
// The subnet is a /24 of 198.18.0.0/15 (RFC 2544's range for test networks)
// picked from the process id and checked against the machine's addresses and
// routes. Names carry the process id, so parallel test processes never share
// anything: bridge `tsb<pid>-<n>`, veths `tsv<pid>-<m>`, namespaces
// `tessera-e2e-<pid>-<n>-<node>`.
//
// Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and the `ip` program; Create
// finds out by trying (a throwaway namespace, then the bridge) and answers
// kFailedPrecondition otherwise, so callers fall back to loopback.
//
// Shaped links: ShapeNode gives a node's link the bandwidth and latency its
// inventory declares, with iproute2's `tc` on both ends of its veth (the
// root namespace's end shapes what the node receives, eth0 in the namespace
// what it sends): `netem delay <latency/2> rate <bandwidth>` on each, so a
// packet between two nodes waits the latency of both halves it crosses
// (latency one way between nodes declaring the same link) and flows at the
// smaller bandwidth, as the planner counts it (scheduler/cluster_snapshot.h).
// Create probes what the kernel offers in its throwaway namespace: netem
// (delay and rate), else tbf (rate only: kernels built without sch_netem),
// else nothing (link_shaping() says which, link_shaping_note() why). The
// qdiscs go with the veth when the lab deletes it.
//
// Ownership: a NetworkLab owns what it created and deletes it (veths,
// namespaces, bridge) when destroyed; Create first deletes what test processes
// that no longer run left behind (a test killed before its destructors ran).
// Thread safety: none; one test thread drives it.
#ifndef TESSERA_TESTS_INTEGRATION_NETNS_H_
#define TESSERA_TESTS_INTEGRATION_NETNS_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace tessera::testing {

class NetworkLab {
 public:
  // What ShapeNode can do on this machine.
  enum class Shaping {
    kNone,      // no usable qdisc (or no `tc`): links are not shaped
    kRateOnly,  // tbf: bandwidth only, no added latency (no netem in this kernel)
    kFull,      // netem: latency and bandwidth
  };

  // The bridge and its subnet, or kFailedPrecondition saying why this
  // process may not build them.
  static Result<std::unique_ptr<NetworkLab>> Create();
  ~NetworkLab();
  NetworkLab(const NetworkLab&) = delete;
  NetworkLab& operator=(const NetworkLab&) = delete;

  // The bridge's address: where processes in node namespaces reach the
  // root namespace.
  const std::string& hub_address() const { return hub_address_; }
  // "bridge tsb123-0, 198.18.7.0/24".
  std::string Describe() const;

  // The namespace of `node`, created and wired on the first call; answers
  // the node's address. The same node gets the same namespace again.
  Result<std::string> AddNode(const std::string& node);
  // /run/netns/<name> of a node added before (for setns), or "" if none.
  std::string NamespacePath(const std::string& node) const;
  std::string NamespaceName(const std::string& node) const;

  Shaping link_shaping() const { return shaping_; }
  // Why links are not (fully) shaped; empty for kFull.
  const std::string& link_shaping_note() const { return shaping_note_; }
  // Shapes the link of `node` (added before) as link_shaping() allows:
  // bandwidth_bytes_per_s > 0, latency_s >= 0 (one way). Shaping again
  // replaces the previous shape. kFailedPrecondition with kNone.
  Status ShapeNode(const std::string& node, double bandwidth_bytes_per_s, double latency_s);
  // "tsv123-0 and tessera-e2e-..:eth0: netem delay 2500us rate 20000000bit"
  // for a shaped node, "" otherwise.
  std::string DescribeShape(const std::string& node) const;

  // Deletes namespaces, bridges and veths whose names carry the id of a
  // process that no longer runs. Answers how many it deleted.
  static int SweepLeftovers();

 private:
  NetworkLab() = default;

  struct Node {
    std::string netns;
    std::string veth;  // the root namespace's end
    std::string address;
    std::vector<std::string> qdisc;  // tc's qdisc arguments on both ends; empty: not shaped
  };
  std::string bridge_;
  std::string subnet_;  // "198.18.7." (the /24's first three octets)
  std::string hub_address_;
  Shaping shaping_ = Shaping::kNone;
  std::string shaping_note_;
  std::map<std::string, Node> nodes_;
  std::vector<std::string> created_netns_;  // deleted even if wiring failed
  std::vector<std::string> created_links_;
};

}  // namespace tessera::testing

#endif  // TESSERA_TESTS_INTEGRATION_NETNS_H_
