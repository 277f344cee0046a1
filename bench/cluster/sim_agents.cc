#include "bench/cluster/sim_agents.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <type_traits>

#include "api/agent_protocol.h"
#include "api/node_identity.h"
#include "bench/cluster/latency.h"

namespace tessera::bench {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

bool IsIp(const std::string& host) {
  boost::system::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

// Built outside the coroutines: GCC 12 cannot keep initializer lists in a
// coroutine frame.
std::string EnrolBody(const std::string& node) { return api::Json{{"node", node}}.dump(); }

api::Device EmulatedDevice(const std::string& node) {
  api::Device d;
  d.node = node;
  d.index = 0;
  d.name = "RTX4090 (emulated)";
  d.type = "cuda";
  d.memory_bytes = int64_t{24} << 30;
  d.measured_tflops = 0.4;
  d.mem_bandwidth_gbps = 1;
  d.emulated = true;
  return d;
}

}  // namespace

struct SimAgents::Impl {
  explicit Impl(SimAgentsOptions o) : options(std::move(o)) {}

  SimAgentsOptions options;
  std::unique_ptr<asio::io_context> ioc;
  std::unique_ptr<ssl::context> tls;  // null: plain HTTP
  tcp::endpoint endpoint;
  std::vector<std::thread> threads;
  std::atomic<bool> stop{false};

  mutable std::mutex mu;
  std::vector<double> immediate_ms;  // guarded by mu
  std::vector<double> held_late_ms;  // guarded by mu
  std::atomic<int64_t> beats{0};
  std::atomic<int64_t> failures{0};

  void AddSample(std::vector<double>* to, double ms) {
    std::lock_guard lock(mu);
    to->push_back(ms);
  }

  // One agent's connection: (re)connects on demand, one request at a time.
  template <class Stream>
  struct Connection {
    Impl* impl;
    std::optional<Stream> stream;
    beast::flat_buffer buffer;

    asio::awaitable<bool> Open() {
      auto exec = co_await asio::this_coro::executor;
      boost::system::error_code ec;
      if constexpr (std::is_same_v<Stream, TlsStream>) {
        stream.emplace(exec, *impl->tls);
        SSL* ssl = stream->native_handle();
        const std::string& host = impl->options.host;
        if (!IsIp(host)) SSL_set_tlsext_host_name(ssl, host.c_str());
        X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
        if (IsIp(host)) {
          X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
        } else {
          X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size());
        }
      } else {
        stream.emplace(exec);
      }
      auto& tcp_layer = beast::get_lowest_layer(*stream);
      tcp_layer.expires_after(10s);
      co_await tcp_layer.async_connect(impl->endpoint,
                                       asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return false;
      tcp_layer.socket().set_option(tcp::no_delay(true));
      if constexpr (std::is_same_v<Stream, TlsStream>) {
        co_await stream->async_handshake(ssl::stream_base::client,
                                         asio::redirect_error(asio::use_awaitable, ec));
        if (ec) co_return false;
      }
      buffer.clear();
      co_return true;
    }

    // The answer, or nullopt on a transport failure (the connection is then
    // dropped and opened again by the next call).
    asio::awaitable<std::optional<http::response<http::string_body>>> Call(
        const std::string& target, const std::string& body, const std::string& token,
        std::chrono::milliseconds timeout) {
      if (!stream) {
        const bool opened = co_await Open();
        if (!opened) {
          stream.reset();
          co_return std::nullopt;
        }
      }
      http::request<http::string_body> req{http::verb::post, target, 11};
      req.set(http::field::host, impl->options.host);
      req.set(http::field::authorization, "Bearer " + token);
      req.set(http::field::content_type, "application/json");
      req.keep_alive(true);
      req.body() = body;
      req.prepare_payload();
      boost::system::error_code ec;
      beast::get_lowest_layer(*stream).expires_after(timeout);
      co_await http::async_write(*stream, req, asio::redirect_error(asio::use_awaitable, ec));
      http::response<http::string_body> res;
      if (!ec) {
        co_await http::async_read(*stream, buffer, res,
                                  asio::redirect_error(asio::use_awaitable, ec));
      }
      if (ec || !res.keep_alive()) {
        beast::get_lowest_layer(*stream).close();
        stream.reset();
        if (ec) co_return std::nullopt;
      }
      co_return res;
    }
  };

  asio::awaitable<void> Sleep(Clock::duration d) {
    if (d <= Clock::duration::zero()) co_return;
    asio::steady_timer timer(co_await asio::this_coro::executor, d);
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }

  template <class Stream>
  asio::awaitable<void> Agent(int index) {
    const std::string node = options.node_prefix + std::to_string(index);
    co_await Sleep(options.spread * index / std::max(1, options.agents));
    Connection<Stream> conn{this, std::nullopt, {}};
    std::string token = options.join_token;
    // Enrol (a controller without enrolment takes the join token itself).
    const std::string enrol_target = "/api/v1/agent/enroll";
    const std::string beat_target = "/api/v1/agent/heartbeat";
    const std::string enrol_body = EnrolBody(node);
    while (!stop) {
      auto enrolled = co_await conn.Call(enrol_target, enrol_body, token, 15s);
      if (enrolled && enrolled->result_int() == 201) {
        auto issued = api::IssuedNodeCredentialFromJson(
            api::Json::parse(enrolled->body(), nullptr, /*allow_exceptions=*/false));
        if (issued.ok()) token = issued->credential;
        break;
      }
      if (enrolled && enrolled->result_int() / 100 == 4) break;  // no enrolment here
      ++failures;
      co_await Sleep(1s);
    }
    api::HeartbeatRequest req;
    req.node = node;
    req.address = "127.0.0.1";
    req.agent_started_ms = 1;
    req.cpu_cores = 2;
    const api::Device device = EmulatedDevice(node);
    req.devices.push_back(device);
    int64_t interval_ms = 1000;
    int64_t wait_ms = 0;
    std::string body;  // the request's JSON, rebuilt when the request changes
    int64_t body_wait = -1;
    while (!stop) {
      if (body_wait != wait_ms || body.empty()) {
        req.wait_ms = wait_ms;
        body = api::ToJson(req).dump();
        body_wait = wait_ms;
      }
      const auto start = Clock::now();
      auto res =
          co_await conn.Call(beat_target, body, token, std::chrono::milliseconds(wait_ms + 15'000));
      const auto took = Clock::now() - start;
      if (!res || res->result_int() != 200) {
        ++failures;
        wait_ms = 0;
        body.clear();
        co_await Sleep(std::chrono::milliseconds(interval_ms));
        continue;
      }
      ++beats;
      auto answer = api::HeartbeatResponseFromJson(
          api::Json::parse(res->body(), nullptr, /*allow_exceptions=*/false));
      if (!answer.ok()) {
        ++failures;
        co_await Sleep(std::chrono::milliseconds(interval_ms));
        continue;
      }
      interval_ms = std::clamp<int64_t>(answer->heartbeat_interval_ms, 100, 60'000);
      // As tessera-agent: the inventory only while the controller lacks it.
      if (answer->accepts_unchanged_inventory && !answer->send_inventory) {
        if (!req.inventory_unchanged) body.clear();
        req.inventory_unchanged = true;
        req.devices.clear();
        req.cpu_cores = 0;
      } else if (req.inventory_unchanged) {
        req.inventory_unchanged = false;
        req.devices.assign(1, device);
        req.cpu_cores = 2;
        body.clear();
      }
      std::set<api::WorkerKey> desired, reported;
      for (const auto& l : answer->desired) desired.insert(l.key);
      for (const auto& w : req.workers) reported.insert(w.key);
      const bool held = wait_ms > 0 && took >= std::chrono::milliseconds(wait_ms / 2);
      if (wait_ms == 0) {
        AddSample(&immediate_ms, Ms(took));
      } else if (held && desired == reported) {
        AddSample(&held_late_ms, std::max(0.0, Ms(took) - static_cast<double>(wait_ms)));
      }
      if (desired != reported) {
        // Start what is new, stop what is gone; report at once.
        req.workers.clear();
        for (const auto& k : desired) {
          api::WorkerStatus w;
          w.key = k;
          w.pid = 4242;
          w.state = api::WorkerState::kRunning;
          req.workers.push_back(w);
        }
        wait_ms = 0;
        body.clear();
        continue;
      }
      if (wait_ms > 0 && !held) {
        // Answered early without news (a controller that does not hold
        // answers): ask again after an interval, as the agent does.
        co_await Sleep(std::chrono::milliseconds(interval_ms) - took);
      }
      wait_ms = std::min<int64_t>(interval_ms, 3000);
    }
  }
};

SimAgents::SimAgents(SimAgentsOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

SimAgents::~SimAgents() { Stop(); }

Status SimAgents::Start() {
  Impl& m = *impl_;
  boost::system::error_code ec;
  auto address = asio::ip::make_address(m.options.host, ec);
  if (ec) return InvalidArgument("not an IP address: " + m.options.host, "host");
  m.endpoint = tcp::endpoint(address, m.options.port);
  if (!m.options.ca_file.empty()) {
    m.tls = std::make_unique<ssl::context>(ssl::context::tls_client);
    m.tls->set_options(ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    m.tls->load_verify_file(m.options.ca_file, ec);
    if (ec) return InvalidArgument("cannot read CA file: " + ec.message(), "ca_file");
    m.tls->set_verify_mode(ssl::verify_peer);
  }
  m.ioc = std::make_unique<asio::io_context>(m.options.threads);
  for (int i = 0; i < m.options.agents; ++i) {
    if (m.tls) {
      asio::co_spawn(*m.ioc, m.Agent<TlsStream>(i), asio::detached);
    } else {
      asio::co_spawn(*m.ioc, m.Agent<PlainStream>(i), asio::detached);
    }
  }
  for (int t = 0; t < m.options.threads; ++t) m.threads.emplace_back([&m] { m.ioc->run(); });
  return Status::Ok();
}

void SimAgents::Stop() {
  Impl& m = *impl_;
  m.stop = true;
  if (m.ioc) m.ioc->stop();
  for (std::thread& t : m.threads) t.join();
  m.threads.clear();
  m.ioc.reset();  // destroys the suspended agents (and their sockets) first
}

void SimAgents::ClearSamples() {
  std::lock_guard lock(impl_->mu);
  impl_->immediate_ms.clear();
  impl_->held_late_ms.clear();
}

std::vector<double> SimAgents::ImmediateBeatMs() const {
  std::lock_guard lock(impl_->mu);
  return impl_->immediate_ms;
}

std::vector<double> SimAgents::HeldBeatLateMs() const {
  std::lock_guard lock(impl_->mu);
  return impl_->held_late_ms;
}

int64_t SimAgents::beats() const { return impl_->beats.load(); }
int64_t SimAgents::failures() const { return impl_->failures.load(); }

}  // namespace tessera::bench
