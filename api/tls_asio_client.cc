#include "api/tls_asio_client.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <exception>

#include "common/hex.h"

namespace tessera::api {
namespace {

namespace ssl = boost::asio::ssl;

bool IsIpLiteral(const std::string& host) {
  in_addr v4{};
  in6_addr v6{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 || inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

bool HasSha256(X509* cert, const std::string& pin) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (cert == nullptr || X509_digest(cert, EVP_sha256(), md, &n) != 1) return false;
  return HexEncode(md, n) == pin;
}

// Verifies the presented chain against the pinned certificate alone: the
// certificate in the chain whose SHA-256 is the pin becomes the only trust
// anchor (a partial chain is fine, so the pin may name the CA or the server
// certificate itself), and the chain must verify up to it as a TLS server.
int VerifyAgainstPin(X509_STORE_CTX* ctx, void* arg) {
  const std::string& pin = *static_cast<const std::string*>(arg);
  X509* leaf = X509_STORE_CTX_get0_cert(ctx);
  STACK_OF(X509)* chain = X509_STORE_CTX_get0_untrusted(ctx);
  X509* anchor = HasSha256(leaf, pin) ? leaf : nullptr;
  for (int i = 0; anchor == nullptr && chain != nullptr && i < sk_X509_num(chain); ++i) {
    if (HasSha256(sk_X509_value(chain, i), pin)) anchor = sk_X509_value(chain, i);
  }
  if (anchor == nullptr) {
    X509_STORE_CTX_set_error(ctx, X509_V_ERR_CERT_UNTRUSTED);
    return 0;
  }
  X509_STORE* store = X509_STORE_new();
  X509_STORE_CTX* check = X509_STORE_CTX_new();
  int ok = 0;
  if (store != nullptr && check != nullptr && X509_STORE_add_cert(store, anchor) == 1 &&
      X509_STORE_CTX_init(check, store, leaf, chain) == 1) {
    X509_STORE_CTX_set_default(check, "ssl_server");
    X509_VERIFY_PARAM_set_flags(X509_STORE_CTX_get0_param(check), X509_V_FLAG_PARTIAL_CHAIN);
    ok = X509_verify_cert(check) == 1 ? 1 : 0;
    if (ok != 1) X509_STORE_CTX_set_error(ctx, X509_STORE_CTX_get_error(check));
  } else {
    X509_STORE_CTX_set_error(ctx, X509_V_ERR_UNSPECIFIED);
  }
  X509_STORE_CTX_free(check);
  X509_STORE_free(store);
  return ok;
}

// A client context and the pin its verify callback reads.
struct ClientContext {
  ssl::context context{ssl::context::tls_client};
  std::string pin;
};

}  // namespace

Result<std::shared_ptr<ssl::context>> MakeClientSslContext(const TlsClientOptions& options) {
  try {
    auto holder = std::make_shared<ClientContext>();
    SSL_CTX* ctx = holder->context.native_handle();
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    holder->context.set_verify_mode(ssl::verify_peer);
    if (!options.ca_sha256.empty()) {
      TESSERA_ASSIGN_OR_RETURN(holder->pin,
                               NormalizeSha256Fingerprint(options.ca_sha256, "ca_sha256"));
      SSL_CTX_set_cert_verify_callback(ctx, &VerifyAgainstPin, &holder->pin);
    } else if (!options.ca_file.empty()) {
      boost::system::error_code ec;
      holder->context.load_verify_file(options.ca_file, ec);
      if (ec) {
        return InvalidArgument(
            "cannot load CA certificates from " + options.ca_file + ": " + ec.message(), "ca_file");
      }
    } else {
      holder->context.set_default_verify_paths();
    }
    return std::shared_ptr<ssl::context>(holder, &holder->context);
  } catch (const std::exception& e) {
    return Internal(std::string("TLS client context: ") + e.what());
  }
}

Status PrepareClientSsl(SSL* ssl, const std::string& host, const TlsClientOptions& options) {
  const bool ip = IsIpLiteral(host);
  if (!ip && SSL_set_tlsext_host_name(ssl, host.c_str()) != 1) {
    return InvalidArgument("cannot use \"" + host + "\" as a TLS server name", "host");
  }
  if (!options.ca_sha256.empty()) return Status::Ok();  // the pin names the cluster's CA
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  int set = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str())
               : X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size());
  if (set != 1) return InvalidArgument("cannot check the certificate for " + host, "host");
  return Status::Ok();
}

}  // namespace tessera::api
