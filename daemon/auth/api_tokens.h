// API tokens and the agent join token, checked above the store.
//
// Purpose: the one place that decides whether a presented bearer token or
// join token is valid. Every Store backend only stores and returns their rows
// (TokenRecord, SecretDigest: an id, a salt and SHA-256(salt || secret));
// this file parses the plaintext, recomputes the digest, compares it in
// constant time and refuses revoked tokens. It also says which users hold
// the admin role outside a request (job admission).
//
// Ownership: values only; the Store is borrowed for the call.
// Thread safety: safe from any thread (as safe as the Store, which is).
#ifndef TESSERA_DAEMON_AUTH_API_TOKENS_H_
#define TESSERA_DAEMON_AUTH_API_TOKENS_H_

#include <string_view>
#include <vector>

#include "common/status.h"
#include "daemon/store/store.h"

namespace tessera::daemon::auth {

// The token a bearer presents ("tsr_<id>_<secret>"), without its secret.
// kUnauthenticated when malformed, unknown, with the wrong secret (compared
// in constant time) or revoked; other store errors pass through.
// REQUIRES: store != nullptr.
Result<TokenInfo> AuthenticateApiToken(Store* store, std::string_view plaintext);

// OK when `plaintext` is the agent join token. kUnauthenticated when none is
// set or it differs (constant time); other store errors pass through.
// REQUIRES: store != nullptr.
Status CheckAgentJoinToken(Store* store, std::string_view plaintext);

// Whether `user` holds a token with the admin role that is not revoked.
bool HoldsAdminToken(const std::vector<TokenInfo>& tokens, std::string_view user);

}  // namespace tessera::daemon::auth

#endif  // TESSERA_DAEMON_AUTH_API_TOKENS_H_
