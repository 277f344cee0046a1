#include "daemon/self_signed_ca.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>

#include "api/tls_context.h"
#include "common/atomic_file.h"

namespace tessera::daemon {
namespace {

namespace fs = std::filesystem;

struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using Cert = std::unique_ptr<X509, X509Free>;

constexpr long kCaDays = 3650;     // NOLINT(runtime/int): OpenSSL's type
constexpr long kServerDays = 730;  // NOLINT(runtime/int)
constexpr long kRenewDays = 30;    // NOLINT(runtime/int)

Status OpenSslFailure(const std::string& what) {
  unsigned long e = ERR_get_error();  // NOLINT(runtime/int)
  ERR_clear_error();
  char buf[256] = "unknown error";
  if (e != 0) ERR_error_string_n(e, buf, sizeof(buf));
  return Internal(what + ": " + buf);
}

bool IsIp(const std::string& s) {
  in_addr v4{};
  in6_addr v6{};
  return inet_pton(AF_INET, s.c_str(), &v4) == 1 || inet_pton(AF_INET6, s.c_str(), &v6) == 1;
}

Result<Pkey> NewKey() {
  Pkey key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) return OpenSslFailure("EC key generation");
  return key;
}

// Adds extension `nid` = `value` (OpenSSL's config syntax) to cert.
Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return OpenSslFailure("certificate extension " + value);
  const int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1) return OpenSslFailure("X509_add_ext");
  return Status::Ok();
}

// A certificate for `key` named `common_name`, valid `days` from an hour
// ago, with a random 127-bit serial. Not yet signed.
Result<Cert> NewCertificate(EVP_PKEY* key, const std::string& common_name, long days) {  // NOLINT
  Cert cert(X509_new());
  if (!cert) return OpenSslFailure("X509_new");
  X509_set_version(cert.get(), 2);
  std::unique_ptr<BIGNUM, decltype(&BN_free)> serial(BN_new(), &BN_free);
  if (!serial || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr) {
    return OpenSslFailure("certificate serial");
  }
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), days * 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>("Tessera"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  return cert;
}

// Writes text to path atomically with exactly `mode` (common/atomic_file.h).
Status WriteFile(FileSystem& files, const fs::path& path, const std::string& text, uint32_t mode) {
  AtomicWriteOptions options;
  options.mode = mode;
  options.ignore_umask = true;
  Status written = WriteFileAtomically(files, path, text, options);
  if (!written.ok()) return Unavailable(written.message());
  return Status::Ok();
}

Result<std::string> PemOf(X509* cert) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return OpenSslFailure("PEM certificate");
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);  // NOLINT(runtime/int)
  return std::string(data, static_cast<size_t>(n));
}

Result<std::string> PemOf(EVP_PKEY* key) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return OpenSslFailure("PEM key");
  }
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);  // NOLINT(runtime/int)
  return std::string(data, static_cast<size_t>(n));
}

// What `read` (a PEM_read_bio_* function) parses of the PEM file at `path`;
// null when the file cannot be read or parsed.
template <typename Owned, typename Read>
Owned ReadPem(FileSystem& files, const fs::path& path, Read read) {
  Result<std::string> pem = files.ReadFile(path);
  if (!pem.ok()) return nullptr;
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem->data(), static_cast<int>(pem->size())));
  if (!bio) return nullptr;
  return Owned(read(bio.get(), nullptr, nullptr, nullptr));
}

// The certificate or key in a PEM file; null when it cannot be read or parsed.
Cert ReadCert(FileSystem& files, const fs::path& path) {
  return ReadPem<Cert>(files, path, PEM_read_bio_X509);
}

Pkey ReadKey(FileSystem& files, const fs::path& path) {
  return ReadPem<Pkey>(files, path, PEM_read_bio_PrivateKey);
}

// Whether the existing server certificate can stay: signed by ca, key
// matches, names every server name, not expiring within kRenewDays.
bool ServerCertificateFits(X509* cert, EVP_PKEY* key, X509* ca,
                           const std::vector<std::string>& names) {
  if (cert == nullptr || key == nullptr) return false;
  if (X509_check_private_key(cert, key) != 1) return false;
  EVP_PKEY* ca_key = X509_get0_pubkey(ca);
  if (ca_key == nullptr || X509_verify(cert, ca_key) != 1) return false;
  time_t soon = std::time(nullptr) + kRenewDays * 24 * 3600;
  if (X509_cmp_time(X509_get0_notAfter(cert), &soon) <= 0) return false;
  for (const std::string& name : names) {
    int ok = IsIp(name) ? X509_check_ip_asc(cert, name.c_str(), 0)
                        : X509_check_host(cert, name.c_str(), name.size(), 0, nullptr);
    if (ok != 1) return false;
  }
  return true;
}

}  // namespace

std::vector<std::string> DefaultServerNames(const std::string& listen_address,
                                            const std::vector<std::string>& extra) {
  std::vector<std::string> names;
  auto add = [&](const std::string& n) {
    if (!n.empty() && std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  };
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) add(host);
  add("localhost");
  add("127.0.0.1");
  add("::1");
  if (listen_address != "0.0.0.0" && listen_address != "::") add(listen_address);
  for (const std::string& n : extra) add(n);
  return names;
}

Result<SelfSignedTls> EnsureSelfSignedTls(const std::string& dir,
                                          const std::vector<std::string>& server_names,
                                          FileSystem* files) {
  if (server_names.empty()) return InvalidArgument("name at least one", "tls_server_names");
  if (Status made = files->CreateDirs(dir); !made.ok()) return Unavailable(made.message());
  ::chmod(dir.c_str(), 0700);
  const fs::path ca_pem = fs::path(dir) / "ca.pem", ca_key_path = fs::path(dir) / "ca.key";
  const fs::path server_pem = fs::path(dir) / "server.pem";
  const fs::path server_key_path = fs::path(dir) / "server.key";
  SelfSignedTls out;
  out.server = {server_pem.string(), server_key_path.string()};
  out.ca_file = ca_pem.string();

  Cert ca = ReadCert(*files, ca_pem);
  Pkey ca_key = ReadKey(*files, ca_key_path);
  if (!ca || !ca_key || X509_check_private_key(ca.get(), ca_key.get()) != 1) {
    TESSERA_ASSIGN_OR_RETURN(ca_key, NewKey());
    TESSERA_ASSIGN_OR_RETURN(ca, NewCertificate(ca_key.get(), "Tessera cluster CA", kCaDays));
    X509_set_issuer_name(ca.get(), X509_get_subject_name(ca.get()));
    TESSERA_RETURN_IF_ERROR(
        AddExtension(ca.get(), ca.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
    TESSERA_RETURN_IF_ERROR(
        AddExtension(ca.get(), ca.get(), NID_key_usage, "critical,keyCertSign,cRLSign"));
    TESSERA_RETURN_IF_ERROR(AddExtension(ca.get(), ca.get(), NID_subject_key_identifier, "hash"));
    if (X509_sign(ca.get(), ca_key.get(), EVP_sha256()) == 0) return OpenSslFailure("CA signing");
    TESSERA_ASSIGN_OR_RETURN(std::string key_pem, PemOf(ca_key.get()));
    TESSERA_RETURN_IF_ERROR(WriteFile(*files, ca_key_path, key_pem, 0600));
    TESSERA_ASSIGN_OR_RETURN(std::string cert_pem, PemOf(ca.get()));
    TESSERA_RETURN_IF_ERROR(WriteFile(*files, ca_pem, cert_pem, 0644));
    out.made_ca = true;
  }
  TESSERA_ASSIGN_OR_RETURN(std::string ca_text, PemOf(ca.get()));
  TESSERA_ASSIGN_OR_RETURN(out.ca_sha256, api::CertificatePemSha256(ca_text));

  Cert server = ReadCert(*files, server_pem);
  Pkey server_key = ReadKey(*files, server_key_path);
  if (!out.made_ca &&
      ServerCertificateFits(server.get(), server_key.get(), ca.get(), server_names)) {
    return out;
  }
  TESSERA_ASSIGN_OR_RETURN(server_key, NewKey());
  TESSERA_ASSIGN_OR_RETURN(server, NewCertificate(server_key.get(), server_names[0], kServerDays));
  X509_set_issuer_name(server.get(), X509_get_subject_name(ca.get()));
  std::string san;
  for (const std::string& name : server_names) {
    if (!san.empty()) san += ",";
    san += (IsIp(name) ? "IP:" : "DNS:") + name;
  }
  TESSERA_RETURN_IF_ERROR(
      AddExtension(server.get(), ca.get(), NID_basic_constraints, "critical,CA:FALSE"));
  TESSERA_RETURN_IF_ERROR(
      AddExtension(server.get(), ca.get(), NID_key_usage, "critical,digitalSignature"));
  TESSERA_RETURN_IF_ERROR(AddExtension(server.get(), ca.get(), NID_ext_key_usage, "serverAuth"));
  TESSERA_RETURN_IF_ERROR(AddExtension(server.get(), ca.get(), NID_subject_alt_name, san));
  TESSERA_RETURN_IF_ERROR(
      AddExtension(server.get(), ca.get(), NID_authority_key_identifier, "keyid:always"));
  if (X509_sign(server.get(), ca_key.get(), EVP_sha256()) == 0) {
    return OpenSslFailure("server certificate signing");
  }
  TESSERA_ASSIGN_OR_RETURN(std::string server_key_pem, PemOf(server_key.get()));
  TESSERA_RETURN_IF_ERROR(WriteFile(*files, server_key_path, server_key_pem, 0600));
  TESSERA_ASSIGN_OR_RETURN(std::string server_cert_pem, PemOf(server.get()));
  TESSERA_RETURN_IF_ERROR(WriteFile(*files, server_pem, server_cert_pem + ca_text, 0644));
  out.issued_server_certificate = true;
  return out;
}

}  // namespace tessera::daemon
