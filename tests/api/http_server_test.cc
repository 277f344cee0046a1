// HttpServer and HttpClient against each other on a real loopback port, plus
// raw sockets for what a well-behaved client never sends.
#include "api/http_server.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <functional>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/beast_aliases.h"
#include "api/http_client.h"
#include "tests/api/fake_control_plane.h"

namespace tessera::api {
namespace {

// A handler: the real router, plus /test/echo (answers the remote address
// and the "n" query) and /test/slow (blocks until released).
class ServerFixture : public ::testing::Test {
 protected:
  void StartServer(HttpServerOptions options = {}) {
    options.address = "127.0.0.1";
    options.port = 0;
    options.on_listening = [this](uint16_t port) { announced_port_ = port; };
    server_ = std::make_unique<HttpServer>(options, [this](const Request& r) {
      if (r.target.starts_with("/test/echo")) {
        Response res;
        res.content_type = "text/plain";
        res.body = r.remote_address + " " + r.target;
        return res;
      }
      if (r.target == "/test/slow") {
        slow_entered_.set_value();
        release_slow_.get_future().wait();
        Response res;
        res.content_type = "text/plain";
        res.body = "slow done";
        return res;
      }
      return router_.Handle(r);
    });
    Status st = server_->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_NE(server_->port(), 0);
  }

  void TearDown() override {
    if (server_) server_->Stop();
  }

  // A raw connection with a 5 s receive timeout, so a broken server fails the
  // test instead of hanging it.
  tcp::socket RawConnect() {
    tcp::socket s(ioc_);
    s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), server_->port()));
    timeval tv{5, 0};
    ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return s;
  }

  // Writes `bytes` on a new raw connection and reads one answer; a read
  // error fails the test.
  http::response<http::string_body> RawExchange(const std::string& bytes) {
    tcp::socket s = RawConnect();
    net::write(s, net::buffer(bytes));
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    beast::error_code ec;
    http::read(s, buffer, res, ec);
    EXPECT_FALSE(ec) << ec.message();
    return res;
  }

  testing::FakeControlPlane cp_;
  Router router_{cp_, RouterOptions{}};
  std::unique_ptr<HttpServer> server_;
  uint16_t announced_port_ = 0;
  std::promise<void> slow_entered_;
  std::promise<void> release_slow_;
  net::io_context ioc_;
};

TEST_F(ServerFixture, HappyPathThroughClient) {
  StartServer();
  EXPECT_EQ(announced_port_, server_->port());
  HttpClient client("127.0.0.1", server_->port());
  client.SetBearerToken("user-token");
  auto res = client.Request("POST", "/api/v1/jobs",
                            R"({"name":"a","entrypoint":"builtin:x","global_batch":8,"steps":1})");
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->status, 201) << res->body;
  EXPECT_EQ(res->headers["location"], "/api/v1/jobs/1");
  EXPECT_EQ(res->headers["content-type"], "application/json");
  auto got = client.Request("GET", "/api/v1/jobs/1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(Json::parse(got->body)["spec"]["name"], "a");
}

TEST_F(ServerFixture, ErrorsAreJsonOverTheWire) {
  StartServer();
  HttpClient client("127.0.0.1", server_->port());
  auto res = client.Request("GET", "/api/v1/jobs");
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->status, 401);
  EXPECT_EQ(Json::parse(res->body)["error"]["code"], "unauthenticated");
  EXPECT_EQ(res->headers["www-authenticate"], "Bearer realm=\"tessera\"");
}

TEST_F(ServerFixture, BodyOverLimitGets413AndServerKeepsServing) {
  StartServer();
  HttpClient client("127.0.0.1", server_->port());
  client.SetBearerToken("user-token");
  std::string big(2 * 1024 * 1024, 'x');
  auto res = client.Request("POST", "/api/v1/jobs", big);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->status, 413);
  EXPECT_EQ(Json::parse(res->body)["error"]["code"], "payload_too_large");
  auto after = client.Request("GET", "/healthz");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->status, 200);
}

TEST_F(ServerFixture, KeepAliveReusesOneConnection) {
  StartServer();
  HttpClient client("127.0.0.1", server_->port());
  std::set<std::string> remotes;
  for (int i = 0; i < 5; ++i) {
    auto res = client.Request("GET", "/test/echo");
    ASSERT_TRUE(res.ok());
    ASSERT_EQ(res->status, 200);
    remotes.insert(res->body.substr(0, res->body.find(' ')));
  }
  EXPECT_EQ(remotes.size(), 1u);
  EXPECT_EQ(server_->open_connections(), 1u);
}

TEST_F(ServerFixture, PipelinedRequestsAnsweredInOrder) {
  HttpServerOptions options;
  options.pipeline_limit = 2;  // fewer than the requests sent: reading must pause and resume
  StartServer(options);
  tcp::socket s = RawConnect();
  std::string requests;
  for (int i = 1; i <= 5; ++i) {
    requests += "GET /test/echo?n=" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n\r\n";
  }
  net::write(s, net::buffer(requests));
  beast::flat_buffer buffer;
  for (int i = 1; i <= 5; ++i) {
    http::response<http::string_body> res;
    beast::error_code ec;
    http::read(s, buffer, res, ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_EQ(res.result_int(), 200u);
    std::string body = res.body();
    EXPECT_EQ(body.substr(body.find(' ') + 1), "/test/echo?n=" + std::to_string(i));
  }
}

TEST_F(ServerFixture, IdleConnectionIsClosed) {
  HttpServerOptions options;
  options.idle_timeout = std::chrono::milliseconds(200);
  StartServer(options);
  tcp::socket s = RawConnect();
  char byte;
  beast::error_code ec;
  size_t n = s.read_some(net::buffer(&byte, 1), ec);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(ec, net::error::eof) << ec.message();
}

TEST_F(ServerFixture, MalformedHttpGets400AndServerKeepsServing) {
  StartServer();
  http::response<http::string_body> not_http = RawExchange("THIS IS NOT HTTP\r\n\r\n");
  ASSERT_EQ(not_http.result_int(), 400u);
  EXPECT_EQ(Json::parse(not_http.body())["error"]["code"], "invalid_argument");
  EXPECT_FALSE(not_http.keep_alive());
  EXPECT_EQ(RawExchange("GET / HTTP/1.1\r\nBad Header\r\n\r\n").result_int(), 400u)
      << "a bad header line";
  HttpClient client("127.0.0.1", server_->port());
  auto res = client.Request("GET", "/healthz");
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->status, 200);
}

TEST_F(ServerFixture, GracefulStopFinishesInFlightRequest) {
  HttpServerOptions options;
  options.shutdown_grace = std::chrono::seconds(10);
  StartServer(options);
  uint16_t port = server_->port();
  auto in_flight = std::async(std::launch::async, [port] {
    HttpClient client("127.0.0.1", port);
    return client.Request("GET", "/test/slow");
  });
  slow_entered_.get_future().wait();
  // Stop while the handler runs; release the handler from another thread
  // once Stop has begun.
  std::thread releaser([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    release_slow_.set_value();
  });
  server_->Stop();
  releaser.join();
  auto res = in_flight.get();
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "slow done");
  EXPECT_EQ(res->headers["connection"], "close");
  // The listener is gone.
  HttpClient late("127.0.0.1", port, std::chrono::seconds(2));
  auto refused = late.Request("GET", "/healthz");
  EXPECT_FALSE(refused.ok());
}

TEST_F(ServerFixture, StopClosesIdleKeepAliveConnections) {
  StartServer();
  HttpClient client("127.0.0.1", server_->port());
  ASSERT_TRUE(client.Request("GET", "/healthz").ok());
  EXPECT_EQ(server_->open_connections(), 1u);
  server_->Stop();
  EXPECT_EQ(server_->open_connections(), 0u);
}

TEST_F(ServerFixture, ClientReconnectsAfterServerClosedIdleConnection) {
  HttpServerOptions options;
  options.idle_timeout = std::chrono::milliseconds(100);
  StartServer(options);
  HttpClient client("127.0.0.1", server_->port());
  auto first = client.Request("GET", "/test/echo");
  ASSERT_TRUE(first.ok());
  // Wait until the server has dropped the idle connection.
  for (int i = 0; i < 500 && server_->open_connections() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(server_->open_connections(), 0u);
  auto second = client.Request("GET", "/test/echo");
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->status, 200);
  EXPECT_NE(first->body, second->body);  // a new connection: a new client port
}

TEST_F(ServerFixture, ClientDeadlineOnSlowServer) {
  StartServer();
  HttpClient client("127.0.0.1", server_->port(), std::chrono::milliseconds(200));
  auto res = client.Request("GET", "/test/slow");
  EXPECT_EQ(res.status().code(), StatusCode::kDeadlineExceeded) << res.status().ToString();
  release_slow_.set_value();
}

TEST(HttpClientTest, RefusedConnectionIsUnavailable) {
  // Bind and close a socket to find a port nobody listens on.
  net::io_context ioc;
  tcp::acceptor a(ioc, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  uint16_t port = a.local_endpoint().port();
  a.close();
  HttpClient client("127.0.0.1", port, std::chrono::seconds(2));
  auto res = client.Request("GET", "/healthz");
  EXPECT_EQ(res.status().code(), StatusCode::kUnavailable) << res.status().ToString();
}

TEST(HttpClientTest, RejectsInjectedTarget) {
  HttpClient client("127.0.0.1", 1);
  EXPECT_EQ(client.Request("GET", "/x HTTP/1.1\r\nEvil: 1").status().field(), "target");
  EXPECT_EQ(client.Request("get", "/x").status().field(), "method");
}

TEST(HttpServerTest, BindFailureIsUnavailable) {
  HttpServer first({}, [](const Request&) { return Response{}; });
  ASSERT_TRUE(first.Start().ok());
  HttpServerOptions options;
  options.port = first.port();
  HttpServer second(options, [](const Request&) { return Response{}; });
  Status st = second.Start();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  HttpServerOptions bad;
  bad.address = "not-an-ip";
  EXPECT_EQ(HttpServer(bad, [](const Request&) { return Response{}; }).Start().field(), "address");
}

// An async handler that parks every /park request (keeps its Responder) and
// answers everything else at once.
class ParkingServer {
 public:
  explicit ParkingServer(HttpServerOptions options = {}) {
    options.address = "127.0.0.1";
    options.port = 0;
    server_ = std::make_unique<HttpServer>(
        options, AsyncHttpHandler([this](const Request& r, Responder done) {
          if (r.target.starts_with("/park")) {
            std::lock_guard lock(mu_);
            parked_.emplace_back(r.target, std::move(done));
            return;
          }
          Response res;
          res.content_type = "text/plain";
          res.body = "now " + r.target;
          done.Send(res);
        }));
  }
  HttpServer& server() { return *server_; }
  size_t parked() {
    std::lock_guard lock(mu_);
    return parked_.size();
  }
  // Answers every parked request (from this thread) with its own target.
  void ReleaseAll() {
    std::vector<std::pair<std::string, Responder>> all;
    {
      std::lock_guard lock(mu_);
      all.swap(parked_);
    }
    for (auto& [target, done] : all) {
      Response res;
      res.content_type = "text/plain";
      res.body = "later " + target;
      done.Send(res);
    }
  }
  // Drops every parked Responder unanswered.
  void DropAll() {
    std::lock_guard lock(mu_);
    parked_.clear();
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<std::string, Responder>> parked_;
  std::unique_ptr<HttpServer> server_;
};

bool WaitFor(const std::function<bool()>& condition) {
  for (int i = 0; i < 2000; ++i) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return condition();
}

tcp::socket ConnectWithTimeout(net::io_context& ioc, uint16_t port) {
  tcp::socket s(ioc);
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  timeval tv{20, 0};
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return s;
}

TEST(HttpServerDeferredTest, ParkedRequestsHoldNoIoThread) {
  HttpServerOptions options;
  options.io_threads = 2;
  ParkingServer parking(options);
  ASSERT_TRUE(parking.server().Start().ok());
  // Far more parked requests than io threads.
  net::io_context ioc;
  std::vector<tcp::socket> sockets;
  constexpr int kParked = 40;
  for (int i = 0; i < kParked; ++i) {
    sockets.push_back(ConnectWithTimeout(ioc, parking.server().port()));
    std::string req = "GET /park?n=" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n\r\n";
    net::write(sockets.back(), net::buffer(req));
  }
  ASSERT_TRUE(WaitFor([&] { return parking.parked() == kParked; })) << parking.parked();
  // Other requests are answered meanwhile.
  HttpClient client("127.0.0.1", parking.server().port(), std::chrono::seconds(20));
  for (int i = 0; i < 5; ++i) {
    auto res = client.Request("GET", "/now");
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    EXPECT_EQ(res->body, "now /now");
  }
  // The parked ones get their answers, each on its own connection, and the
  // connection stays usable.
  parking.ReleaseAll();
  for (int i = 0; i < kParked; ++i) {
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    beast::error_code ec;
    http::read(sockets[i], buffer, res, ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_EQ(res.body(), "later /park?n=" + std::to_string(i));
    EXPECT_TRUE(res.keep_alive());
  }
  net::write(sockets[0], net::buffer(std::string("GET /again HTTP/1.1\r\nHost: x\r\n\r\n")));
  beast::flat_buffer buffer;
  http::response<http::string_body> again;
  http::read(sockets[0], buffer, again);
  EXPECT_EQ(again.body(), "now /again");
}

TEST(HttpServerDeferredTest, PipelinedRequestBehindAParkedOneWaitsItsTurn) {
  ParkingServer parking;
  ASSERT_TRUE(parking.server().Start().ok());
  net::io_context ioc;
  tcp::socket s = ConnectWithTimeout(ioc, parking.server().port());
  net::write(s, net::buffer(std::string("GET /park HTTP/1.1\r\nHost: x\r\n\r\n"
                                        "GET /second HTTP/1.1\r\nHost: x\r\n\r\n")));
  ASSERT_TRUE(WaitFor([&] { return parking.parked() == 1; }));
  parking.ReleaseAll();
  beast::flat_buffer buffer;
  http::response<http::string_body> first, second;
  http::read(s, buffer, first);
  http::read(s, buffer, second);
  EXPECT_EQ(first.body(), "later /park");
  EXPECT_EQ(second.body(), "now /second");
}

TEST(HttpServerDeferredTest, ADroppedAnswerIsA500NotAHang) {
  ParkingServer parking;
  ASSERT_TRUE(parking.server().Start().ok());
  HttpClient client("127.0.0.1", parking.server().port(), std::chrono::seconds(20));
  auto res = std::async(std::launch::async, [&] { return client.Request("GET", "/park"); });
  ASSERT_TRUE(WaitFor([&] { return parking.parked() == 1; }));
  parking.DropAll();
  auto got = res.get();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->status, 500);
  EXPECT_EQ(Json::parse(got->body)["error"]["code"], "internal");
}

TEST(HttpServerDeferredTest, StopAnswersAParkedRequestAnsweredDuringTheGrace) {
  HttpServerOptions options;
  options.shutdown_grace = std::chrono::seconds(20);
  ParkingServer parking(options);
  ASSERT_TRUE(parking.server().Start().ok());
  HttpClient client("127.0.0.1", parking.server().port(), std::chrono::seconds(20));
  auto res = std::async(std::launch::async, [&] { return client.Request("GET", "/park"); });
  ASSERT_TRUE(WaitFor([&] { return parking.parked() == 1; }));
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    parking.ReleaseAll();
  });
  parking.server().Stop();
  releaser.join();
  auto got = res.get();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->body, "later /park");
  EXPECT_EQ(got->headers["connection"], "close");
}

TEST(HttpServerDeferredTest, AnAnswerAfterTheServerIsGoneIsDropped) {
  Responder kept;
  {
    HttpServerOptions options;
    options.shutdown_grace = std::chrono::milliseconds(100);
    ParkingServer parking(options);
    ASSERT_TRUE(parking.server().Start().ok());
    net::io_context ioc;
    tcp::socket s = ConnectWithTimeout(ioc, parking.server().port());
    net::write(s, net::buffer(std::string("GET /park HTTP/1.1\r\nHost: x\r\n\r\n")));
    ASSERT_TRUE(WaitFor([&] { return parking.parked() == 1; }));
    parking.server().Stop();  // the parked request is closed unanswered
  }
  // ParkingServer (and its Responders) are gone; a Responder kept elsewhere
  // must be harmless too: nothing to check but that nothing crashes.
  kept.Send(Response{});
  EXPECT_FALSE(kept.sent()) << "a default Responder answers nothing";
}

}  // namespace
}  // namespace tessera::api
