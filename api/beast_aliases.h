// The short names api/'s HTTP code gives Boost.Beast and Boost.Asio: beast,
// http, net and tcp, declared in tessera::api.
//
// For the .cc files of HttpClient and HttpServer and their tests only: Beast
// and Asio stay out of api/'s public headers (api/CMakeLists.txt), so no
// public header includes this one. Aliases only: no state, nothing to own,
// nothing shared between threads.
#ifndef TESSERA_API_BEAST_ALIASES_H_
#define TESSERA_API_BEAST_ALIASES_H_

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace tessera::api {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

}  // namespace tessera::api

#endif  // TESSERA_API_BEAST_ALIASES_H_
