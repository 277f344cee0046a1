// TransportGuard: a connection reset under a rank fails the rank's collectives
// instead of killing the rank.
//
// A peer's connection can be reset under a rank (a peer's stack gone, a flaky
// link, `ss -K`). Two paths of Gloo's TCP transport (gloo/transport/tcp/pair.cc)
// then end the process rather than the operation:
//   - SIGPIPE: Gloo writes with writev(2), which raises SIGPIPE on a socket
//     whose peer has gone; its default action kills the rank (exit 141).
//   - An exception nothing catches: when a peer says it is ready to receive,
//     Gloo's event-loop thread writes the pending send in place; when that
//     write fails it marks the connection failed and then rethrows the
//     gloo::IoException on that thread, and std::terminate aborts the rank
//     (exit 134).
// Either way the rank's state is lost, where it could have waited to re-form
// with its peers (reform.h), and the controller starts a new attempt from the
// checkpoint.
//
// InstallTransportGuard() ignores SIGPIPE (the write returns EPIPE and Gloo
// fails the operation), and sets a terminate handler that parks a thread a
// gloo::IoException escapes for the life of the process: any thread but the
// one that installed the guard. The failed connection's operations fail (Gloo
// signalled them before it threw) or time out, the rank marks the peer loss,
// and its group is abandoned, never destroyed (collectives.cc), so nothing waits on
// the locks the parked thread holds. Every other uncaught exception, and any on
// the installing thread, goes to the handler that was set before (the default
// aborts).
//
// What it cannot mend: a thread that later closes another connection of the
// same Gloo device waits for the parked loop to tick (Gloo's
// Loop::unregisterDescriptor), so a rank whose connections to several peers of
// one group fail at once may stall in that group until the controller replaces
// it, as a rank that aborted is.
//
// Thread safety: InstallTransportGuard once, from main, before any thread or
// process group exists; ParkedTransportThreads from any thread.
#ifndef TESSERA_WORKER_RUNTIME_TRANSPORT_GUARD_H_
#define TESSERA_WORKER_RUNTIME_TRANSPORT_GUARD_H_

namespace tessera::worker {

void InstallTransportGuard();

// How many threads the guard has parked in this process.
int ParkedTransportThreads();

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_TRANSPORT_GUARD_H_
