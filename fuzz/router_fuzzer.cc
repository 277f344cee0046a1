// libFuzzer target: arbitrary bytes are parsed as one HTTP/1.1 request by
// Beast's parser (as HttpServer does) and, when they form one, handled by the
// router over a fresh in-memory ControlPlane. Finds crashes, hangs, leaks and
// 5xx answers to bad input (a 500 aborts: bad input must get a 4xx).
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "api/router.h"
#include "tests/api/fake_control_plane.h"

namespace {

namespace http = boost::beast::http;

std::string* g_static_dir = nullptr;

tessera::api::Request ToRequest(const http::request<http::string_body>& req) {
  tessera::api::Request r;
  r.method = std::string(req.method_string());
  r.target = std::string(req.target());
  for (const auto& field : req) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto [it, inserted] = r.headers.emplace(name, std::string(field.value()));
    if (!inserted) it->second += ", " + std::string(field.value());
  }
  r.body = req.body();
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // A small web UI directory so static-file paths are exercised too.
  auto dir = std::filesystem::temp_directory_path() / "tessera-fuzz-web";
  std::filesystem::create_directories(dir / "js");
  std::ofstream(dir / "index.html") << "<h1>fuzz</h1>";
  std::ofstream(dir / "js" / "app.js") << "1";
  g_static_dir = new std::string(dir.string());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  http::request_parser<http::string_body> parser;
  parser.eager(true);
  parser.body_limit(1024 * 1024);
  parser.header_limit(16 * 1024);
  boost::beast::error_code ec;
  boost::asio::const_buffer buf(data, size);
  while (buf.size() > 0 && !parser.is_done()) {
    size_t used = parser.put(buf, ec);
    if (ec == http::error::need_more) break;
    if (ec) return 0;
    if (used == 0) break;
    buf += used;
  }
  if (!parser.is_done()) {
    parser.put_eof(ec);
    if (ec || !parser.is_done()) return 0;
  }
  tessera::api::testing::FakeControlPlane cp;
  tessera::api::RouterOptions options;
  options.static_dir = *g_static_dir;
  tessera::api::Router router(cp, options);
  tessera::api::Response res = router.Handle(ToRequest(parser.get()));
  // The fake never fails on its own, so a 500 means the router mishandled input.
  if (res.status == 500) std::abort();
  if (res.status < 100 || res.status > 599) std::abort();
  return 0;
}
