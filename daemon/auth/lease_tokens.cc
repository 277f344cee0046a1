#include "daemon/auth/lease_tokens.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common/hex.h"
#include "daemon/auth/token_crypto.h"

namespace tessera::daemon {

LeaseTokens::LeaseTokens(std::string key) : key_(std::move(key)) {}

Result<LeaseTokens> LeaseTokens::WithRandomKey() {
  TESSERA_ASSIGN_OR_RETURN(std::string key, RandomHex(32));
  return LeaseTokens(std::move(key));
}

std::string LeaseTokens::For(api::JobId job, int64_t attempt, int64_t rank) const {
  const std::string message =
      "lease:" + std::to_string(job) + ":" + std::to_string(attempt) + ":" + std::to_string(rank);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &len);
  return "tsl_" + HexEncode(digest, len);
}

bool LeaseTokens::Check(std::string_view token, api::JobId job, int64_t attempt,
                        int64_t rank) const {
  return ConstantTimeEquals(token, For(job, attempt, rank));
}

}  // namespace tessera::daemon
