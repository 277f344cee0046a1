// PortHolders: which processes hold a TCP port on this node, so a refused
// launch ("env.MASTER_PORT: 29509 is in use") says by whom.
//
// Reads /proc/net/tcp and /proc/net/tcp6 (every socket whose local port is
// `port`, with its state) and /proc/<pid>/fd (which process owns each socket's
// inode; an agent running as root sees every process, another account only
// its own). Reads `proc_root` instead of /proc when given (tests).
//
// Thread safety: pure reads of /proc; safe anywhere.
#ifndef TESSERA_AGENT_PORT_HOLDERS_H_
#define TESSERA_AGENT_PORT_HOLDERS_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tessera::agent {

struct PortHolder {
  std::string state;    // "LISTEN", "ESTABLISHED", "TIME_WAIT", ...
  uint64_t inode = 0;   // 0 for sockets no process owns (TIME_WAIT)
  int64_t pid = -1;     // -1 when no readable process holds the inode
  std::string command;  // /proc/<pid>/comm, or empty
};

// Every socket on `port` (IPv4 and IPv6), listening ones first.
std::vector<PortHolder> FindPortHolders(int port, const std::filesystem::path& proc_root = "/proc");

// "pid 4411 (tessera-worker) listening; pid 4415 (python3) established" for
// the holders that matter to a bind: listening sockets and sockets bound to the
// port by a process; empty when none is known.
std::string DescribePortHolders(const std::vector<PortHolder>& holders);

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_PORT_HOLDERS_H_
