#include "api/responder.h"

#include <atomic>
#include <exception>
#include <utility>

#include "api/http_status.h"

namespace tessera::api {

struct Responder::State {
  explicit State(SendFn fn) : send(std::move(fn)) {}
  ~State() {
    if (!done.exchange(true)) {
      try {
        send(ErrorResponse(Internal("the request's answer was dropped")));
      } catch (...) {
        // Out of memory while building the error: nothing more to do here.
      }
    }
  }
  SendFn send;
  std::atomic<bool> done{false};
};

Responder::Responder(SendFn send) : state_(std::make_shared<State>(std::move(send))) {}

void Responder::Send(Response response) const {
  if (state_ == nullptr || state_->done.exchange(true)) return;
  state_->send(std::move(response));
}

bool Responder::sent() const { return state_ != nullptr && state_->done.load(); }

Responder Responder::Then(std::function<Response(Response)> map) const {
  // The mapped Responder keeps this one's state alive; its own state only
  // forwards (its 500 for a dropped answer included).
  auto inner = state_;
  return Responder([inner, map = std::move(map)](Response response) {
    if (inner == nullptr || inner->done.exchange(true)) return;
    Response mapped;
    try {
      mapped = map(std::move(response));
    } catch (const std::exception& e) {
      mapped = ErrorResponse(Internal(std::string("answer failed: ") + e.what()));
    }
    inner->send(std::move(mapped));
  });
}

}  // namespace tessera::api
