// TransportGuard in a child process each (gtest death tests fork): a write to a
// socket whose peer is gone returns EPIPE instead of killing the process, and
// Gloo's I/O failure escaping a thread of its own parks that thread while the
// process lives on with the peer loss marked; anything else still aborts.
#include "worker/runtime/transport_guard.h"

#include <gloo/common/error.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "worker/runtime/collectives.h"

namespace tessera::worker {
namespace {

using namespace std::chrono_literals;

// In the child: installs the guard (unless told not to), lets `thrower` escape
// a thread, and exits 0 once the thread is parked with the peer loss marked,
// 3 if it is not parked within 10 s.
template <typename Throw>
[[noreturn]] void EscapeAThread(bool install, Throw thrower) {
  if (install) InstallTransportGuard();
  std::thread(thrower).detach();
  for (int i = 0; i < 1000; ++i) {
    if (ParkedTransportThreads() == 1 && PeerLost()) std::_Exit(0);
    std::this_thread::sleep_for(10ms);
  }
  std::_Exit(3);
}

struct Case {
  const char* name;
  bool install;
  bool gloo_error;  // a gloo::IoException, else a std::runtime_error
  bool lives;
};

class TransportGuardTest : public ::testing::TestWithParam<Case> {};

TEST_P(TransportGuardTest, ParksOnlyGloosIoFailureOnAnotherThread) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Case& c = GetParam();
  auto run = [&] {
    EscapeAThread(c.install, [gloo = c.gloo_error] {
      if (gloo) throw ::gloo::IoException("writev [127.0.0.1]:1: Software caused connection abort");
      throw std::runtime_error("some other failure");
    });
  };
  if (c.lives) {
    EXPECT_EXIT(run(), ::testing::ExitedWithCode(0), "Gloo's transport thread failed");
  } else {
    EXPECT_EXIT(run(), ::testing::KilledBySignal(SIGABRT), "");
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, TransportGuardTest,
                         ::testing::Values(Case{"gloo_io_failure_parked", true, true, true},
                                           Case{"without_the_guard_it_aborts", false, true, false},
                                           Case{"another_exception_still_aborts", true, false,
                                                false}),
                         [](const auto& info) { return std::string(info.param.name); });

// On the thread that installed the guard (main's), Gloo's failure is no
// transport thread's: it aborts as before.
TEST(TransportGuardTest, TheInstallingThreadsOwnFailureAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        InstallTransportGuard();
        try {
          throw ::gloo::IoException("read: Connection reset by peer");
        } catch (...) {
          std::terminate();
        }
      },
      ::testing::KilledBySignal(SIGABRT), "");
}

// Gloo's writev to a socket whose peer has closed: EPIPE with the guard, where
// SIGPIPE would end the process without it.
[[noreturn]] void WriteToAClosedPeer(bool install) {
  if (install) InstallTransportGuard();
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, ends) != 0) std::_Exit(4);
  ::close(ends[1]);
  char byte = 1;
  iovec io{&byte, 1};
  const ssize_t n = ::writev(ends[0], &io, 1);
  std::_Exit(n == -1 && errno == EPIPE ? 0 : 5);
}

TEST(TransportGuardTest, AWriteToAPeerThatIsGoneFailsInsteadOfKillingTheRank) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(WriteToAClosedPeer(true), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(WriteToAClosedPeer(false), ::testing::KilledBySignal(SIGPIPE), "");
}

}  // namespace
}  // namespace tessera::worker
