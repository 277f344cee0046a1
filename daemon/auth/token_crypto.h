// Token crypto: random token parts, salted SHA-256 and constant-time compare.
//
// Purpose: every Store backend keeps API tokens and the agent join token the
// same way: a random salt and SHA-256(salt || secret), never the secret. An
// API token's plaintext is "tsr_<id>_<secret>" with a 16-hex-digit public id
// (the row key) and a 64-hex-digit secret.
//
// Ownership: values only. Thread safety: safe from any thread (OpenSSL's
// RAND_bytes and EVP digests are thread-safe).
#ifndef TESSERA_DAEMON_AUTH_TOKEN_CRYPTO_H_
#define TESSERA_DAEMON_AUTH_TOKEN_CRYPTO_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tessera::daemon {

// `bytes` random bytes from OpenSSL's CSPRNG as lower-case hex
// (2 * bytes characters). kInternal if the generator fails.
Result<std::string> RandomHex(size_t bytes);

// Raw 32-byte SHA-256 of salt || secret.
Result<std::string> SaltedSha256(std::string_view salt, std::string_view secret);

// Compares in time that depends only on the lengths.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

struct TokenParts {
  std::string id;      // 16 hex digits
  std::string secret;  // 64 hex digits
};

// A fresh id, secret and salt.
struct FreshToken {
  TokenParts parts;
  std::string salt;  // 32 hex digits
  std::string hash;  // SaltedSha256(salt, parts.secret)
};
Result<FreshToken> MakeFreshToken();

std::string FormatApiToken(const TokenParts& parts);
// kUnauthenticated("malformed token") unless "tsr_<16 hex>_<64 hex>".
Result<TokenParts> ParseApiToken(std::string_view plaintext);

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_AUTH_TOKEN_CRYPTO_H_
