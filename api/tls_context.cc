#include "api/tls_context.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cctype>
#include <cstdio>
#include <memory>

#include "common/hex.h"

namespace tessera::api {
namespace {

std::string OpenSslError() {
  unsigned long e = ERR_get_error();  // NOLINT(runtime/int): OpenSSL's type
  ERR_clear_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};

Result<std::string> Sha256OfBio(BIO* bio, const std::string& what) {
  std::unique_ptr<X509, X509Free> cert(PEM_read_bio_X509(bio, nullptr, nullptr, nullptr));
  if (!cert) return InvalidArgument(what + " holds no PEM certificate: " + OpenSslError());
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (X509_digest(cert.get(), EVP_sha256(), md, &n) != 1) return Internal("X509_digest failed");
  return HexEncode(md, n);
}

}  // namespace

Result<std::string> NormalizeSha256Fingerprint(std::string_view text, const std::string& field) {
  std::string_view rest = text;
  if (rest.size() > 7 && (rest.substr(0, 7) == "sha256:" || rest.substr(0, 7) == "SHA256:")) {
    rest.remove_prefix(7);
  }
  std::string digits;
  for (char c : rest) {
    if (c != ':') digits.push_back(c);
  }
  Result<std::string> bytes = HexDecode(digits, field);
  if (!bytes.ok() || bytes->size() != 32) {
    return InvalidArgument("must be a SHA-256 fingerprint (64 hex digits, colons allowed)", field);
  }
  return HexEncode(*bytes);
}

std::string DisplayFingerprint(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i < hex.size(); ++i) {
    if (i > 0 && i % 2 == 0) out.push_back(':');
    out.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(hex[i]))));
  }
  return out;
}

Result<std::string> CertificateFileSha256(const std::string& pem_path) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new_file(pem_path.c_str(), "r"));
  if (!bio) return NotFound("cannot read " + pem_path);
  return Sha256OfBio(bio.get(), pem_path);
}

Result<std::string> CertificatePemSha256(std::string_view pem) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return Internal("BIO_new_mem_buf failed");
  return Sha256OfBio(bio.get(), "the PEM text");
}

Status CheckTlsServerFiles(const TlsServerFiles& files) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_server_method()),
                                                        &SSL_CTX_free);
  if (!ctx) return Internal("SSL_CTX_new failed");
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), files.cert_file.c_str()) != 1) {
    return InvalidArgument(
        "cannot load the certificate chain " + files.cert_file + ": " + OpenSslError(),
        "tls_cert_file");
  }
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), files.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return InvalidArgument("cannot load the private key " + files.key_file + ": " + OpenSslError(),
                           "tls_key_file");
  }
  if (SSL_CTX_check_private_key(ctx.get()) != 1) {
    return InvalidArgument("the key does not match the certificate: " + OpenSslError(),
                           "tls_key_file");
  }
  return Status::Ok();
}

}  // namespace tessera::api
