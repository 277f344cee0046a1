#include "daemon/auth/api_tokens.h"

#include <string>

#include "daemon/auth/token_crypto.h"

namespace tessera::daemon::auth {
namespace {

// Whether `secret` hashes to `digest` (constant-time compare).
Result<bool> Matches(const SecretDigest& digest, std::string_view secret) {
  TESSERA_ASSIGN_OR_RETURN(std::string computed, SaltedSha256(digest.salt, secret));
  return ConstantTimeEquals(computed, digest.hash);
}

}  // namespace

Result<TokenInfo> AuthenticateApiToken(Store* store, std::string_view plaintext) {
  TESSERA_ASSIGN_OR_RETURN(TokenParts parts, ParseApiToken(plaintext));
  auto record = store->GetToken(parts.id);
  if (!record.ok()) {
    if (record.status().code() == StatusCode::kNotFound) return Unauthenticated("unknown token");
    return record.status();
  }
  TESSERA_ASSIGN_OR_RETURN(bool matches, Matches(record->secret, parts.secret));
  if (!matches) return Unauthenticated("unknown token");
  if (record->info.revoked_ms) return Unauthenticated("token revoked");
  return record->info;
}

Status CheckAgentJoinToken(Store* store, std::string_view plaintext) {
  auto digest = store->GetAgentJoinToken();
  if (!digest.ok()) {
    if (digest.status().code() == StatusCode::kNotFound) {
      return Unauthenticated("no agent join token is set");
    }
    return digest.status();
  }
  TESSERA_ASSIGN_OR_RETURN(bool matches, Matches(*digest, plaintext));
  if (!matches) return Unauthenticated("wrong join token");
  return Status::Ok();
}

bool HoldsAdminToken(const std::vector<TokenInfo>& tokens, std::string_view user) {
  for (const TokenInfo& t : tokens) {
    if (t.user == user && t.role == api::Role::kAdmin && !t.revoked_ms) return true;
  }
  return false;
}

}  // namespace tessera::daemon::auth
