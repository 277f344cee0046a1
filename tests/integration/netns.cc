#include "tests/integration/netns.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace tessera::testing {
namespace {
namespace fs = std::filesystem;

constexpr char kNetnsPrefix[] = "tessera-e2e-";
constexpr char kNetnsDir[] = "/run/netns";

// An iproute2 program (`ip`, `tc`): PATH first, then where distributions
// install it (a non-root PATH often lacks the sbin folders).
std::string FindProgram(const std::string& name) {
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::stringstream s(path);
    for (std::string d; std::getline(s, d, ':');) {
      if (!d.empty()) dirs.push_back(d);
    }
  }
  for (const char* d : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) dirs.emplace_back(d);
  for (const auto& d : dirs) {
    fs::path p = fs::path(d) / name;
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

// Runs `program args...` (a path) and answers its output (stdout and stderr
// together); kFailedPrecondition with that output when it fails.
Result<std::string> Run(const std::string& program, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {program};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string line;
  for (const auto& a : argv) line += (line.empty() ? "" : " ") + a;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return FailedPrecondition("pipe failed");
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return FailedPrecondition("fork failed");
  }
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
    return FailedPrecondition("`" + line + "` failed: " + out);
  }
  return out;
}

Result<std::string> Ip(const std::vector<std::string>& args) {
  static const std::string ip = FindProgram("ip");
  if (ip.empty()) return FailedPrecondition("no `ip` program (iproute2) found");
  return Run(ip, args);
}

Result<std::string> Tc(const std::vector<std::string>& args) {
  static const std::string tc = FindProgram("tc");
  if (tc.empty()) return FailedPrecondition("no `tc` program (iproute2) found");
  return Run(tc, args);
}

// tc's qdisc arguments for one end of a link: half the one-way latency (a
// packet crosses two ends) and the bandwidth, as `shaping` allows.
std::vector<std::string> QdiscArgs(NetworkLab::Shaping shaping, double bandwidth_bytes_per_s,
                                   double latency_s) {
  const long long bits_per_s = std::max(8LL, std::llround(bandwidth_bytes_per_s * 8));
  const std::string rate = std::to_string(bits_per_s) + "bit";
  if (shaping == NetworkLab::Shaping::kFull) {
    const long long half_us = std::llround(latency_s / 2 * 1e6);
    // limit: packets netem may hold (the delay line plus the rate's queue).
    return {"netem", "delay", std::to_string(half_us) + "us", "rate", rate, "limit", "10000"};
  }
  // tbf: a burst of at least 32 KiB or 10 ms of the rate; a queue of 200 ms.
  const long long burst = std::max(32LL * 1024, std::llround(bandwidth_bytes_per_s / 100));
  return {"tbf", "rate", rate, "burst", std::to_string(burst), "latency", "200ms"};
}

bool ProcessRuns(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

// The process id in `name` after `prefix` (digits up to '-'), or 0.
pid_t PidAfter(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0) return 0;
  size_t end = name.find('-', prefix.size());
  if (end == std::string::npos || end == prefix.size()) return 0;
  std::string digits = name.substr(prefix.size(), end - prefix.size());
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) return 0;
  return static_cast<pid_t>(std::stol(digits));
}

int NextLabNumber() {
  static int next = 0;
  return next++;
}

int NextVethNumber() {
  static int next = 0;
  return next++;
}

}  // namespace

int NetworkLab::SweepLeftovers() {
  int deleted = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(kNetnsDir, ec)) {
    std::string name = entry.path().filename();
    pid_t pid = PidAfter(name, kNetnsPrefix);
    if (pid > 0 && !ProcessRuns(pid) && Ip({"netns", "delete", name}).ok()) ++deleted;
  }
  auto links = Ip({"-o", "link", "show"});
  if (!links.ok()) return deleted;
  std::stringstream lines(*links);
  for (std::string line; std::getline(lines, line);) {
    // "12: tsv123-0@if2: <BROADCAST,...> ..."
    size_t colon = line.find(": ");
    if (colon == std::string::npos) continue;
    std::string name = line.substr(colon + 2);
    name = name.substr(0, name.find_first_of("@:"));
    pid_t pid = PidAfter(name, "tsb");
    if (pid == 0) pid = PidAfter(name, "tsv");
    if (pid > 0 && !ProcessRuns(pid) && Ip({"link", "delete", name}).ok()) ++deleted;
  }
  return deleted;
}

Result<std::unique_ptr<NetworkLab>> NetworkLab::Create() {
  if (::geteuid() != 0) return FailedPrecondition("not root");
  SweepLeftovers();
  const std::string self = std::to_string(::getpid());
  const int lab = NextLabNumber();
  // Probe: a namespace needs CAP_SYS_ADMIN (its bind mount) and CAP_NET_ADMIN.
  const std::string probe = kNetnsPrefix + self + "-probe";
  TESSERA_RETURN_IF_ERROR(Ip({"netns", "add", probe}).status());
  std::unique_ptr<NetworkLab> l(new NetworkLab());
  // Which qdisc shapes links here: try each on the probe's loopback.
  auto netem = Tc(
      {"-n", probe, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms", "rate", "1mbit"});
  if (netem.ok()) {
    l->shaping_ = Shaping::kFull;
  } else {
    (void)Tc({"-n", probe, "qdisc", "del", "dev", "lo", "root"});
    auto tbf = Tc({"-n", probe, "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "1mbit",
                   "burst", "32768", "latency", "200ms"});
    l->shaping_ = tbf.ok() ? Shaping::kRateOnly : Shaping::kNone;
    l->shaping_note_ = netem.status().message();
    if (!tbf.ok()) l->shaping_note_ += "; " + tbf.status().message();
  }
  TESSERA_RETURN_IF_ERROR(Ip({"netns", "delete", probe}).status());

  // A /24 of 198.18.0.0/15 no address or route of this machine uses yet.
  std::string taken;
  for (const auto& args : std::vector<std::vector<std::string>>{{"-o", "-4", "addr", "show"},
                                                                {"-4", "route", "show"}}) {
    auto out = Ip(args);
    if (out.ok()) taken += *out;
  }
  for (char& c : taken) c = c == '\n' ? ' ' : c;
  taken = " " + taken;
  const int first = static_cast<int>((::getpid() * 8 + lab) % 512);
  for (int i = 0; i < 512 && l->subnet_.empty(); ++i) {
    const int n = (first + i) % 512;
    std::string subnet =
        "198." + std::to_string(18 + n / 256) + "." + std::to_string(n % 256) + ".";
    if (taken.find(" " + subnet) == std::string::npos) l->subnet_ = subnet;
  }
  if (l->subnet_.empty()) return FailedPrecondition("no free /24 in 198.18.0.0/15");
  l->hub_address_ = l->subnet_ + "1";
  l->bridge_ = "tsb" + self + "-" + std::to_string(lab);
  TESSERA_RETURN_IF_ERROR(Ip({"link", "add", l->bridge_, "type", "bridge"}).status());
  l->created_links_.push_back(l->bridge_);
  // Where br_netfilter is loaded, a host firewall (Docker's FORWARD DROP)
  // would filter bridged traffic; this bridge is not the firewall's business.
  // Older kernels lack the options: best effort.
  (void)Ip({"link", "set", "dev", l->bridge_, "type", "bridge", "nf_call_iptables", "0",
            "nf_call_ip6tables", "0", "nf_call_arptables", "0"});
  TESSERA_RETURN_IF_ERROR(Ip({"addr", "add", l->hub_address_ + "/24", "dev", l->bridge_}).status());
  TESSERA_RETURN_IF_ERROR(Ip({"link", "set", l->bridge_, "up"}).status());
  return l;
}

NetworkLab::~NetworkLab() {
  // Deleting a veth end deletes its peer at once; a namespace's own links
  // go only when its last user exits, so the veths go first, explicitly.
  for (auto it = created_links_.rbegin(); it != created_links_.rend(); ++it) {
    (void)Ip({"link", "delete", *it});
  }
  for (const auto& ns : created_netns_) (void)Ip({"netns", "delete", ns});
}

std::string NetworkLab::Describe() const { return "bridge " + bridge_ + ", " + subnet_ + "0/24"; }

Result<std::string> NetworkLab::AddNode(const std::string& node) {
  if (auto it = nodes_.find(node); it != nodes_.end()) return it->second.address;
  const int host = static_cast<int>(nodes_.size()) + 2;
  if (host > 254) return ResourceExhausted("the /24 is full");
  Node n;
  const std::string self = std::to_string(::getpid());
  n.netns = kNetnsPrefix + self + "-" + bridge_.substr(bridge_.find('-') + 1) + "-" + node;
  n.veth = "tsv" + self + "-" + std::to_string(NextVethNumber());
  n.address = subnet_ + std::to_string(host);
  TESSERA_RETURN_IF_ERROR(Ip({"netns", "add", n.netns}).status());
  created_netns_.push_back(n.netns);
  TESSERA_RETURN_IF_ERROR(
      Ip({"link", "add", n.veth, "type", "veth", "peer", "name", "eth0", "netns", n.netns})
          .status());
  created_links_.push_back(n.veth);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"link", "set", n.veth, "master", bridge_},
           {"link", "set", n.veth, "up"},
           {"-n", n.netns, "addr", "add", n.address + "/24", "dev", "eth0"},
           {"-n", n.netns, "link", "set", "eth0", "up"},
           {"-n", n.netns, "link", "set", "lo", "up"}}) {
    TESSERA_RETURN_IF_ERROR(Ip(args).status());
  }
  nodes_[node] = n;
  return n.address;
}

Status NetworkLab::ShapeNode(const std::string& node, double bandwidth_bytes_per_s,
                             double latency_s) {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return NotFound("no node " + node + " in the lab");
  if (shaping_ == Shaping::kNone) {
    return FailedPrecondition("links cannot be shaped here: " + shaping_note_);
  }
  if (!(bandwidth_bytes_per_s > 0) || !(latency_s >= 0)) {
    return InvalidArgument("needs bandwidth > 0 and latency >= 0");
  }
  Node& n = it->second;
  std::vector<std::string> qdisc = QdiscArgs(shaping_, bandwidth_bytes_per_s, latency_s);
  std::vector<std::string> root = {"qdisc", "replace", "dev", n.veth, "root"};
  std::vector<std::string> inside = {"-n", n.netns, "qdisc", "replace", "dev", "eth0", "root"};
  root.insert(root.end(), qdisc.begin(), qdisc.end());
  inside.insert(inside.end(), qdisc.begin(), qdisc.end());
  TESSERA_RETURN_IF_ERROR(Tc(root).status());
  TESSERA_RETURN_IF_ERROR(Tc(inside).status());
  n.qdisc = std::move(qdisc);
  return Status::Ok();
}

std::string NetworkLab::DescribeShape(const std::string& node) const {
  auto it = nodes_.find(node);
  if (it == nodes_.end() || it->second.qdisc.empty()) return "";
  std::string out = it->second.veth + " and " + it->second.netns + ":eth0:";
  for (const auto& a : it->second.qdisc) out += " " + a;
  return out;
}

std::string NetworkLab::NamespaceName(const std::string& node) const {
  auto it = nodes_.find(node);
  return it == nodes_.end() ? "" : it->second.netns;
}

std::string NetworkLab::NamespacePath(const std::string& node) const {
  std::string name = NamespaceName(node);
  return name.empty() ? "" : std::string(kNetnsDir) + "/" + name;
}

}  // namespace tessera::testing
