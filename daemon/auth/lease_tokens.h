// LeaseTokens: the bearer tokens that let a rank of an infer job lease chunks.
//
// Purpose: each rank of each attempt of a job gets its own token,
// HMAC-SHA256(key, "lease:<job>:<attempt>:<rank>"), handed to it in
// TESSERA_LEASE_TOKEN with the heartbeat answer. Nothing is stored: the
// controller recomputes the token to check it, so tokens survive a
// controller restart when the key does (tesserad keeps it in
// <state>/lease-key, mode 0600), and a token of one job, attempt or rank is
// worthless for another: the rank a lease request names is the rank its
// token was made for, or the request is refused.
//
// Ownership: a value holding the key. Thread safety: const methods are safe
// to call concurrently.
#ifndef TESSERA_DAEMON_AUTH_LEASE_TOKENS_H_
#define TESSERA_DAEMON_AUTH_LEASE_TOKENS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "api/types.h"
#include "common/status.h"

namespace tessera::daemon {

class LeaseTokens {
 public:
  // REQUIRES: key is not empty (use at least 32 random bytes).
  explicit LeaseTokens(std::string key);
  // A token set with a fresh random key (tests; a daemon without a state dir).
  static Result<LeaseTokens> WithRandomKey();

  // "tsl_" + 64 hex digits.
  std::string For(api::JobId job, int64_t attempt, int64_t rank) const;
  // Constant-time comparison with For(job, attempt, rank).
  bool Check(std::string_view token, api::JobId job, int64_t attempt, int64_t rank) const;

 private:
  std::string key_;
};

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_AUTH_LEASE_TOKENS_H_
