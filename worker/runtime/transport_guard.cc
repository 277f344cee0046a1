#include "worker/runtime/transport_guard.h"

#include <gloo/common/error.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>

#include "worker/runtime/await_work.h"

namespace tessera::worker {
namespace {

std::terminate_handler g_previous = nullptr;
std::thread::id g_installer;
std::atomic<int> g_parked{0};

[[noreturn]] void OnTerminate() {
  // Steps: 1. only an exception on another thread than the installer's; 2.
  // only Gloo's I/O failure; 3. say so, mark the peer loss, park the thread.
  if (std::exception_ptr error = std::current_exception();
      error != nullptr && std::this_thread::get_id() != g_installer) {
    try {
      std::rethrow_exception(error);
    } catch (const ::gloo::IoException& e) {
      const std::string first = MarkPeerLost(e.what());
      std::fprintf(stderr,
                   "tessera-worker: Gloo's transport thread failed (%s); its connection's "
                   "operations fail and the rank waits to re-form\n",
                   first.c_str());
      g_parked.fetch_add(1);
      while (true) std::this_thread::sleep_for(std::chrono::hours(1));
    } catch (...) {
    }
  }
  if (g_previous != nullptr) g_previous();
  std::abort();
}

}  // namespace

void InstallTransportGuard() {
  std::signal(SIGPIPE, SIG_IGN);
  g_installer = std::this_thread::get_id();
  std::terminate_handler previous = std::set_terminate(OnTerminate);
  if (previous != OnTerminate) g_previous = previous;
}

int ParkedTransportThreads() { return g_parked.load(); }

}  // namespace tessera::worker
