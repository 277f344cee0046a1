#include "api/tls_asio_server.h"

#include <openssl/ssl.h>

#include <exception>
#include <string>

namespace tessera::api {

namespace ssl = boost::asio::ssl;

Result<std::shared_ptr<ssl::context>> MakeServerSslContext(const TlsServerFiles& files) {
  TESSERA_RETURN_IF_ERROR(CheckTlsServerFiles(files));
  try {
    auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
    context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                         ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                         ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
    SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
    context->use_certificate_chain_file(files.cert_file);
    context->use_private_key_file(files.key_file, ssl::context::pem);
    return context;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("cannot load the TLS certificate or key: ") + e.what(),
                           "tls_cert_file");
  }
}

}  // namespace tessera::api
