#include "agent/port_holders.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>

namespace tessera::agent {
namespace {

namespace fs = std::filesystem;

std::string OwnComm() {
  std::ifstream in("/proc/self/comm");
  std::string comm;
  std::getline(in, comm);
  return comm;
}

// A socket listening on an ephemeral port of 127.0.0.1 (closed on scope exit).
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd, 4) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ADD_FAILURE() << "cannot listen on loopback";
    }
    port = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd); }
};

TEST(PortHoldersTest, FindsThisProcessListeningAndConnected) {
  Listener l;
  int client = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(l.port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  int accepted = ::accept(l.fd, nullptr, nullptr);
  ASSERT_GE(accepted, 0);

  std::vector<PortHolder> holders = FindPortHolders(l.port);
  ASSERT_GE(holders.size(), 2u);
  EXPECT_EQ(holders[0].state, "LISTEN") << "listening sockets come first";
  EXPECT_EQ(holders[0].pid, ::getpid());
  EXPECT_EQ(holders[0].command, OwnComm());
  bool established = false;
  for (const PortHolder& h : holders) established |= h.state == "ESTABLISHED" && h.pid == getpid();
  EXPECT_TRUE(established);
  const std::string text = DescribePortHolders(holders);
  EXPECT_EQ(text.find("pid " + std::to_string(::getpid()) + " (" + OwnComm() + ") listening"), 0u)
      << text;
  ::close(accepted);
  ::close(client);
}

TEST(PortHoldersTest, AFreePortHasNoHolders) {
  int port = 0;
  {
    Listener l;
    port = l.port;
  }
  EXPECT_EQ(DescribePortHolders(FindPortHolders(port)), "");
}

// A /proc of the test's making: the tables' parsing alone.
TEST(PortHoldersTest, ParsesTablesAndSkipsMalformedRows) {
  const fs::path root = fs::temp_directory_path() / ("tessera-proc-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "net");
  fs::create_directories(root / "77" / "fd");
  std::ofstream(root / "77" / "comm") << "python3\n";
  fs::create_symlink("socket:[4242]", root / "77" / "fd" / "5");
  // 0x7345 = 29509.
  std::ofstream(root / "net" / "tcp")
      << "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
         "timeout inode\n"
      << "   0: 0100007F:7345 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0    "
         "    0 4242 1 0000000000000000 100 0 0 10 0\n"
      << "   1: 0100007F:C0A8 0100007F:7345 06 00000000:00000000 00:00000000 00000000     0    "
         "    0 0 3 0000000000000000\n"
      << "   2: garbage\n"
      << "   3: 0100007F:7345 0100007F:C0A9 06 00000000:00000000 00:00000000 00000000     0    "
         "    0 0 3 0000000000000000\n";
  std::ofstream(root / "net" / "tcp6") << "  sl  local_address\n";
  std::vector<PortHolder> holders = FindPortHolders(29509, root);
  ASSERT_EQ(holders.size(), 2u);
  EXPECT_EQ(holders[0].state, "LISTEN");
  EXPECT_EQ(holders[0].pid, 77);
  EXPECT_EQ(holders[0].command, "python3");
  EXPECT_EQ(holders[1].state, "TIME_WAIT");
  EXPECT_EQ(holders[1].pid, -1);
  EXPECT_EQ(DescribePortHolders(holders), "pid 77 (python3) listening");
  fs::remove_all(root);
}

}  // namespace
}  // namespace tessera::agent
