#include "daemon/auth/token_crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <memory>
#include <vector>

#include "common/hex.h"

namespace tessera::daemon {
namespace {

constexpr size_t kIdHexLen = 16;
constexpr size_t kSecretHexLen = 64;

}  // namespace

Result<std::string> RandomHex(size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  if (bytes > 0 && RAND_bytes(buf.data(), static_cast<int>(bytes)) != 1) {
    return Internal("RAND_bytes failed");
  }
  return HexEncode(buf.data(), buf.size());
}

Result<std::string> SaltedSha256(std::string_view salt, std::string_view secret) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx) return Internal("EVP_MD_CTX_new failed");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), salt.data(), salt.size()) != 1 ||
      EVP_DigestUpdate(ctx.get(), secret.data(), secret.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), digest, &len) != 1) {
    return Internal("SHA-256 failed");
  }
  return std::string(reinterpret_cast<const char*>(digest), len);
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Result<FreshToken> MakeFreshToken() {
  FreshToken t;
  TESSERA_ASSIGN_OR_RETURN(t.parts.id, RandomHex(kIdHexLen / 2));
  TESSERA_ASSIGN_OR_RETURN(t.parts.secret, RandomHex(kSecretHexLen / 2));
  TESSERA_ASSIGN_OR_RETURN(t.salt, RandomHex(16));
  TESSERA_ASSIGN_OR_RETURN(t.hash, SaltedSha256(t.salt, t.parts.secret));
  return t;
}

std::string FormatApiToken(const TokenParts& parts) {
  return "tsr_" + parts.id + "_" + parts.secret;
}

Result<TokenParts> ParseApiToken(std::string_view plaintext) {
  constexpr size_t kLen = 4 + kIdHexLen + 1 + kSecretHexLen;
  if (plaintext.size() != kLen || !plaintext.starts_with("tsr_") ||
      plaintext[4 + kIdHexLen] != '_') {
    return Unauthenticated("malformed token");
  }
  TokenParts parts{std::string(plaintext.substr(4, kIdHexLen)),
                   std::string(plaintext.substr(5 + kIdHexLen))};
  if (!IsLowerHex(parts.id) || !IsLowerHex(parts.secret)) return Unauthenticated("malformed token");
  return parts;
}

}  // namespace tessera::daemon
