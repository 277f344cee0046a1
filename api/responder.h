// Responder: answers one HTTP request later, from any thread.
//
// A route that cannot answer at once (an agent's long poll, held until the
// node has work or its wait ends) takes a Responder instead of returning a
// Response, keeps it with whatever will produce the answer, and returns; no
// thread waits for it. Whoever holds it calls Send once, from any thread.
// HttpServer writes the answer on the connection's own strand; the router's
// synchronous Handle waits for it, so routes stay testable without sockets.
//
// Copies share one answer: the first Send wins and later ones are ignored.
// If every copy is destroyed without a Send, the request is answered with a
// 500 "internal" (a lost answer must not leave the connection hanging).
//
// Thread safety: Send and sent() may be called from any thread at once.
// The send function runs at most once, on the thread of the winning Send
// (or of the last copy's destructor); it must not block.
#ifndef TESSERA_API_RESPONDER_H_
#define TESSERA_API_RESPONDER_H_

#include <functional>
#include <memory>

#include "api/router.h"

namespace tessera::api {

class Responder {
 public:
  using SendFn = std::function<void(Response)>;

  // A Responder that drops its answer (Send does nothing).
  Responder() = default;
  // REQUIRES: send is callable.
  explicit Responder(SendFn send);

  // Answers the request. The first call wins; later calls do nothing.
  void Send(Response response) const;

  // Whether some copy already answered.
  bool sent() const;

  // A Responder that passes its answer through `map` before sending it with
  // this one (e.g. to record how long the request took). Shares this one's
  // once-only answer: a Send through either counts for both. Dropped
  // unsent, it answers the 500 through `map` too.
  Responder Then(std::function<Response(Response)> map) const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace tessera::api

#endif  // TESSERA_API_RESPONDER_H_
