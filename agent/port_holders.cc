// FindPortHolders:
//   1. parse /proc/net/tcp{,6}: column 2 is "local_hex_addr:hex_port", column
//      4 the hex state, column 10 the inode;
//   2. keep the rows whose local port is `port`;
//   3. walk /proc/<pid>/fd once, mapping "socket:[inode]" links to pids.
#include "agent/port_holders.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>

namespace tessera::agent {
namespace {

namespace fs = std::filesystem;

// The kernel's TCP states (include/net/tcp_states.h).
std::string StateName(int state) {
  static const char* kNames[] = {"",           "ESTABLISHED", "SYN_SENT",  "SYN_RECV",
                                 "FIN_WAIT1",  "FIN_WAIT2",   "TIME_WAIT", "CLOSE",
                                 "CLOSE_WAIT", "LAST_ACK",    "LISTEN",    "CLOSING"};
  if (state > 0 && state < static_cast<int>(sizeof(kNames) / sizeof(kNames[0]))) {
    return kNames[state];
  }
  return "state " + std::to_string(state);
}

void ReadTable(const fs::path& table, int port, std::vector<PortHolder>* out) {
  std::ifstream in(table);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout;
    uint64_t inode = 0;
    if (!(row >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
          timeout >> inode)) {
      continue;
    }
    const size_t colon = local.rfind(':');
    if (colon == std::string::npos) continue;
    try {
      if (std::stoi(local.substr(colon + 1), nullptr, 16) != port) continue;
      out->push_back({StateName(std::stoi(state, nullptr, 16)), inode, -1, ""});
    } catch (const std::exception&) {
      continue;  // a malformed row
    }
  }
}

}  // namespace

std::vector<PortHolder> FindPortHolders(int port, const fs::path& proc_root) {
  std::vector<PortHolder> holders;
  ReadTable(proc_root / "net" / "tcp", port, &holders);
  ReadTable(proc_root / "net" / "tcp6", port, &holders);
  std::map<uint64_t, size_t> by_inode;
  for (size_t i = 0; i < holders.size(); ++i) {
    if (holders[i].inode != 0) by_inode[holders[i].inode] = i;
  }
  std::error_code ec;
  for (auto p = fs::directory_iterator(proc_root, ec);
       !ec && p != fs::directory_iterator() && !by_inode.empty(); p.increment(ec)) {
    const std::string name = p->path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    std::error_code fd_ec;
    for (auto fd = fs::directory_iterator(p->path() / "fd", fd_ec);
         !fd_ec && fd != fs::directory_iterator(); fd.increment(fd_ec)) {
      std::error_code link_ec;
      const std::string target = fs::read_symlink(fd->path(), link_ec).string();
      if (link_ec || target.rfind("socket:[", 0) != 0) continue;
      uint64_t inode = 0;
      try {
        inode = std::stoull(target.substr(8));
      } catch (const std::exception&) {
        continue;
      }
      auto it = by_inode.find(inode);
      if (it == by_inode.end()) continue;
      PortHolder& h = holders[it->second];
      h.pid = std::stoll(name);
      std::ifstream comm(p->path() / "comm");
      std::getline(comm, h.command);
    }
  }
  std::stable_sort(holders.begin(), holders.end(), [](const PortHolder& a, const PortHolder& b) {
    return (a.state == "LISTEN") > (b.state == "LISTEN");
  });
  return holders;
}

std::string DescribePortHolders(const std::vector<PortHolder>& holders) {
  std::string out;
  for (const PortHolder& h : holders) {
    if (h.state != "LISTEN" && h.pid < 0) continue;  // TIME_WAIT and the like
    std::string state = h.state;
    std::transform(state.begin(), state.end(), state.begin(), ::tolower);
    std::string one = h.pid >= 0 ? "pid " + std::to_string(h.pid) +
                                       (h.command.empty() ? "" : " (" + h.command + ")")
                                 : "a process this agent cannot see";
    one += state == "listen" ? " listening" : " " + state;
    if (out.find(one) != std::string::npos) continue;
    out += (out.empty() ? "" : "; ") + one;
  }
  return out;
}

}  // namespace tessera::agent
