#include "api/http_server.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "api/beast_aliases.h"
#include "api/http_fields.h"
#include "api/http_status.h"
#include "api/http_stream.h"
#include "api/responder.h"
#include "api/tls_asio_server.h"

namespace tessera::api {
namespace {

// After an answer that closes the connection early (413, 400), the rest of
// the client's upload is read and dropped for at most this long / this
// much, so the client sees the answer rather than a connection reset.
constexpr std::chrono::milliseconds kLingerTime{2000};
constexpr size_t kLingerBytes = 16 * 1024 * 1024;

class Session;

// State shared by the listener, the sessions and HttpServer.
struct Shared {
  HttpServerOptions options;
  AsyncHttpHandler handler;
  // Set when options.tls: every connection must complete a TLS handshake
  // before anything is read (plain HTTP is dropped unanswered).
  std::shared_ptr<net::ssl::context> tls;

  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;                                // guarded by mu
  std::atomic<bool> stopping_flag{false};               // `stopping`, readable without mu
  std::map<Session*, std::weak_ptr<Session>> sessions;  // guarded by mu
  // Sessions waiting for a deferred answer: no operation of theirs is
  // pending, so this keeps them alive. Guarded by mu.
  std::map<Session*, std::shared_ptr<Session>> parked;
  // Set (under mu) before the io_context is destroyed: answers that come
  // later are dropped instead of being posted to it.
  bool io_gone = false;
};

http::response<http::string_body> ToBeast(const Response& r, unsigned version, bool keep_alive,
                                          const std::string& server) {
  int status = (r.status >= 100 && r.status <= 999) ? r.status : 500;
  http::response<http::string_body> res{static_cast<http::status>(status), version};
  res.set(http::field::server, server);
  if (!r.content_type.empty()) res.set(http::field::content_type, r.content_type);
  for (const auto& [name, value] : r.headers) res.insert(name, value);
  bool bodyless = (status >= 100 && status < 200) || status == 204 || status == 304;
  if (!bodyless) res.body() = r.body;
  res.keep_alive(keep_alive);
  res.prepare_payload();
  return res;
}

Request FromBeast(const http::request<http::string_body>& req, const std::string& remote) {
  Request r;
  r.method = std::string(req.method_string());
  r.target = std::string(req.target());
  r.headers = HeaderMap(req);
  r.body = req.body();
  r.remote_address = remote;
  return r;
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {
    if (shared_->tls) {
      stream_.tls.emplace(std::move(socket), *shared_->tls);
    } else {
      stream_.plain.emplace(std::move(socket));
    }
    beast::error_code ec;
    auto ep = transport().socket().remote_endpoint(ec);
    if (!ec) remote_ = ep.address().to_string() + ":" + std::to_string(ep.port());
  }

  ~Session() {
    std::lock_guard lock(shared_->mu);
    shared_->sessions.erase(this);
    shared_->cv.notify_all();
  }

  void Run() {
    if (stream_.tls) {
      net::dispatch(transport().get_executor(),
                    beast::bind_front_handler(&Session::DoHandshake, shared_from_this()));
      return;
    }
    net::dispatch(transport().get_executor(),
                  beast::bind_front_handler(&Session::DoRead, shared_from_this()));
  }

  // Graceful: finish what is queued, then close. Called through the strand.
  void Shutdown() {
    net::dispatch(transport().get_executor(), [self = shared_from_this()] {
      self->stopping_ = true;
      // Answers not yet on the wire tell the client the connection ends.
      for (size_t i = self->writing_ ? 1 : 0; i < self->queue_.size(); ++i) {
        self->queue_[i].keep_alive(false);
      }
      if (!self->writing_ && self->queue_.empty() && !self->awaiting_) self->DoClose();
    });
  }

  // Closes at once, whatever is pending; an answer still to come is dropped.
  void ForceClose() {
    net::dispatch(transport().get_executor(), [self = shared_from_this()] {
      self->DoClose();
      std::shared_ptr<Session> parked;  // released outside mu
      {
        std::lock_guard lock(self->shared_->mu);
        auto it = self->shared_->parked.find(self.get());
        if (it != self->shared_->parked.end()) {
          parked = std::move(it->second);
          self->shared_->parked.erase(it);
        }
      }
    });
  }

 private:
  const HttpServerOptions& options() const { return shared_->options; }

  // The TCP layer, under TLS or not.
  beast::tcp_stream& transport() { return stream_.tcp(); }

  // TLS first: a client that does not complete the handshake in time (or
  // speaks plain HTTP) is closed without an answer.
  void DoHandshake() {
    transport().expires_after(options().idle_timeout);
    reading_ = true;
    stream_.tls->async_handshake(net::ssl::stream_base::server,
                                 [self = shared_from_this()](beast::error_code ec) {
                                   self->reading_ = false;
                                   if (ec || self->closed_) {
                                     self->DoClose();
                                     return;
                                   }
                                   self->DoRead();
                                 });
  }

  void DoRead() {
    if (closed_ || stopping_ || read_closed_ || reading_ || awaiting_) return;
    if (queue_.size() >= std::max<size_t>(1, options().pipeline_limit))
      return;  // resumes in OnWrite
    parser_.emplace();
    parser_->body_limit(options().body_limit);
    parser_->header_limit(static_cast<std::uint32_t>(options().header_limit));
    transport().expires_after(options().idle_timeout);
    reading_ = true;
    stream_.Visit([&](auto& s) {
      http::async_read(s, buffer_, *parser_,
                       beast::bind_front_handler(&Session::OnRead, shared_from_this()));
    });
  }

  void OnRead(beast::error_code ec, std::size_t /*bytes*/) {
    reading_ = false;
    if (closed_) return;
    if (ec == http::error::end_of_stream) {
      read_closed_ = true;
      if (!writing_ && queue_.empty() && !awaiting_) DoClose();
      return;
    }
    if (ec == net::error::operation_aborted) return;
    if (ec == http::error::body_limit) {
      QueueError(PayloadTooLarge("request body is larger than " +
                                 std::to_string(options().body_limit) + " bytes"));
      return;
    }
    if (ec == http::error::header_limit) {
      QueueError(PayloadTooLarge("request headers are larger than " +
                                 std::to_string(options().header_limit) + " bytes"));
      return;
    }
    if (ec && ec.category() == http::make_error_code(http::error::bad_target).category() &&
        ec != http::error::partial_message) {
      QueueError(InvalidArgument("malformed HTTP request: " + ec.message(), "request"));
      return;
    }
    if (ec) {  // timeout, reset, truncated request: nothing sensible to answer
      DoClose();
      return;
    }

    http::request<http::string_body> req = parser_->release();
    // The handler answers through a Responder, now or later (a parked long
    // poll). Reading pauses until the answer is queued, so answers keep the
    // request order and a parked request holds no io thread.
    awaiting_ = true;
    pending_version_ = req.version();
    pending_keep_alive_ = req.keep_alive();
    {
      std::lock_guard lock(shared_->mu);
      shared_->parked[this] = shared_from_this();
    }
    Responder done([shared = shared_, weak = weak_from_this()](Response response) {
      DeliverAnswer(shared, weak, std::move(response));
    });
    handler_thread_.store(std::this_thread::get_id());
    try {
      shared_->handler(FromBeast(req, remote_), done);
    } catch (const std::exception& e) {
      done.Send(ErrorResponse(Internal(std::string("handler failed: ") + e.what())));
    } catch (...) {
      done.Send(ErrorResponse(Internal("handler failed")));
    }
    handler_thread_.store(std::thread::id());
  }

  // Sends an answer to the session from any thread: at once when called
  // from inside the session's own handler call (on its strand), else posted
  // to its strand. Dropped when the session or the io_context is gone.
  static void DeliverAnswer(const std::shared_ptr<Shared>& shared,
                            const std::weak_ptr<Session>& weak, Response response) {
    std::shared_ptr<Session> self = weak.lock();
    if (self == nullptr) return;
    if (self->handler_thread_.load() == std::this_thread::get_id()) {
      self->OnAnswer(std::move(response));
      return;
    }
    {
      std::lock_guard lock(shared->mu);
      if (shared->io_gone) return;
      net::post(self->transport().get_executor(), [self, response = std::move(response)]() mutable {
        self->OnAnswer(std::move(response));
      });
    }
    // `self` is released here, outside mu (~Session takes it).
  }

  // The answer to the request being handled. On the strand.
  void OnAnswer(Response response) {
    std::shared_ptr<Session> keep;  // released last, outside mu
    {
      std::lock_guard lock(shared_->mu);
      auto it = shared_->parked.find(this);
      if (it != shared_->parked.end()) {
        keep = std::move(it->second);
        shared_->parked.erase(it);
      }
    }
    if (!awaiting_) return;
    awaiting_ = false;
    if (closed_) return;
    // Decided once answered: a request finished during Stop() is answered
    // with "Connection: close".
    bool keep_alive = pending_keep_alive_ && !stopping_ && !shared_->stopping_flag.load();
    if (!keep_alive) read_closed_ = true;
    try {
      Queue(ToBeast(response, pending_version_, keep_alive, options().server_header));
    } catch (const std::exception& e) {
      // A handler answer Beast refuses (e.g. a bad header): still answer.
      Queue(ToBeast(ErrorResponse(Internal(std::string("bad response: ") + e.what())),
                    pending_version_, keep_alive, options().server_header));
    }
    DoRead();
  }

  // Answers a request that cannot be read further, then closes.
  void QueueError(const Status& status) {
    read_closed_ = true;
    linger_ = true;
    Queue(ToBeast(ErrorResponse(status), 11, /*keep_alive=*/false, options().server_header));
  }

  void Queue(http::response<http::string_body>&& res) {
    queue_.push_back(std::move(res));
    if (!writing_) DoWrite();
  }

  void DoWrite() {
    writing_ = true;
    transport().expires_after(options().idle_timeout);
    stream_.Visit([&](auto& s) {
      http::async_write(s, queue_.front(),
                        beast::bind_front_handler(&Session::OnWrite, shared_from_this()));
    });
  }

  void OnWrite(beast::error_code ec, std::size_t /*bytes*/) {
    writing_ = false;
    if (closed_) return;
    if (ec) {
      DoClose();
      return;
    }
    bool close = queue_.front().need_eof();
    queue_.pop_front();
    if (close) {
      if (linger_) {
        StartLinger();
      } else {
        DoClose();
      }
      return;
    }
    if (!queue_.empty()) {
      DoWrite();
      return;
    }
    if (awaiting_) return;  // the answer being made closes or reads on
    if (stopping_ || read_closed_) {
      DoClose();
      return;
    }
    DoRead();  // resumes reading if the pipeline limit paused it
  }

  void StartLinger() {
    beast::error_code ignored;
    transport().socket().shutdown(tcp::socket::shutdown_send, ignored);
    transport().expires_after(
        std::min<std::chrono::milliseconds>(kLingerTime, options().idle_timeout));
    DoLinger();
  }

  void DoLinger() {
    if (reading_) return;  // the aborted read finishes first
    reading_ = true;
    stream_.Visit([&](auto& s) {
      s.async_read_some(net::buffer(scratch_),
                        [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                          self->reading_ = false;
                          self->lingered_ += n;
                          if (ec || self->lingered_ > kLingerBytes || self->closed_) {
                            self->DoClose();
                            return;
                          }
                          self->DoLinger();
                        });
    });
  }

  void DoClose() {
    if (closed_) return;
    closed_ = true;
    stream_.CloseSocket();
  }

  // Exactly one is set: TLS (Shared::tls) or plain.
  HttpStream stream_;
  std::shared_ptr<Shared> shared_;
  std::string remote_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<http::response<http::string_body>> queue_;  // front() is being written
  std::array<char, 64 * 1024> scratch_{};
  size_t lingered_ = 0;
  // The thread running this session's handler call, so an answer sent from
  // inside it is queued at once instead of posted.
  std::atomic<std::thread::id> handler_thread_{};
  unsigned pending_version_ = 11;  // of the request being answered
  bool pending_keep_alive_ = true;
  bool awaiting_ = false;  // a request's answer is still to come
  bool reading_ = false;
  bool writing_ = false;
  bool read_closed_ = false;  // no more requests will be read
  bool stopping_ = false;
  bool linger_ = false;
  bool closed_ = false;
};

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(net::io_context& ioc, std::shared_ptr<Shared> shared)
      : ioc_(ioc), acceptor_(net::make_strand(ioc)), shared_(std::move(shared)) {}

  Status Open(const tcp::endpoint& endpoint) {
    beast::error_code ec;
    acceptor_.open(endpoint.protocol(), ec);
    if (ec) return Unavailable("open socket: " + ec.message());
    acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (ec) return Unavailable("set SO_REUSEADDR: " + ec.message());
    acceptor_.bind(endpoint, ec);
    if (ec) {
      return Unavailable("bind " + endpoint.address().to_string() + ":" +
                         std::to_string(endpoint.port()) + ": " + ec.message());
    }
    acceptor_.listen(shared_->options.listen_backlog, ec);
    if (ec) return Unavailable("listen: " + ec.message());
    port_ = acceptor_.local_endpoint(ec).port();
    if (ec) return Unavailable("local_endpoint: " + ec.message());
    return Status::Ok();
  }

  uint16_t port() const { return port_; }

  void Run() {
    net::dispatch(acceptor_.get_executor(),
                  beast::bind_front_handler(&Listener::DoAccept, shared_from_this()));
  }

  void Close() {
    net::dispatch(acceptor_.get_executor(), [self = shared_from_this()] {
      beast::error_code ignored;
      self->acceptor_.close(ignored);
    });
  }

 private:
  void DoAccept() {
    acceptor_.async_accept(net::make_strand(ioc_),
                           beast::bind_front_handler(&Listener::OnAccept, shared_from_this()));
  }

  void OnAccept(beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) {
      std::shared_ptr<Session> session;
      {
        std::lock_guard lock(shared_->mu);
        if (shared_->stopping) return;  // socket closes as it goes out of scope
        session = std::make_shared<Session>(std::move(socket), shared_);
        shared_->sessions.emplace(session.get(), session);
      }
      session->Run();
    }
    // An accept error (e.g. too many open files) drops that one connection only.
    DoAccept();
  }

  net::io_context& ioc_;
  tcp::acceptor acceptor_;
  std::shared_ptr<Shared> shared_;
  uint16_t port_ = 0;
};

}  // namespace

struct HttpServer::Impl {
  std::shared_ptr<Shared> shared = std::make_shared<Shared>();
  std::optional<net::io_context> ioc;  // destroyed before `shared`
  // Keeps the io threads running until Stop() is done: a handler posted by
  // Stop() (Session::Shutdown) must run even when nothing else is pending.
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::shared_ptr<Listener> listener;
  std::vector<std::thread> threads;
  uint16_t port = 0;
  bool started = false;
  bool stopped = false;

  std::vector<std::shared_ptr<Session>> LiveSessions() {
    std::vector<std::shared_ptr<Session>> out;
    for (auto& [ptr, weak] : shared->sessions) {
      if (auto s = weak.lock()) out.push_back(std::move(s));
    }
    return out;
  }
};

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : HttpServer(std::move(options),
                 [handler = std::move(handler)](const Request& request, Responder done) {
                   done.Send(handler(request));
                 }) {}

HttpServer::HttpServer(HttpServerOptions options, AsyncHttpHandler handler)
    : impl_(std::make_unique<Impl>()) {
  impl_->shared->options = std::move(options);
  impl_->shared->handler = std::move(handler);
}

HttpServer::~HttpServer() {
  Stop();
  // Answers that come from now on are dropped; sessions still waiting for
  // one are released while their io_context is alive.
  std::map<Session*, std::shared_ptr<Session>> parked;
  {
    std::lock_guard lock(impl_->shared->mu);
    impl_->shared->io_gone = true;
    parked.swap(impl_->shared->parked);
  }
  parked.clear();
  // Handlers still queued in the io_context own sessions; destroying the
  // context releases them while `shared` is alive.
  impl_->listener.reset();
  impl_->ioc.reset();
}

Status HttpServer::Start() {
  if (impl_->started) return FailedPrecondition("server already started");
  const HttpServerOptions& opt = impl_->shared->options;
  beast::error_code ec;
  auto address = net::ip::make_address(opt.address, ec);
  if (ec) return InvalidArgument("not an IP address: " + opt.address, "address");
  if (opt.tls) {
    auto context = MakeServerSslContext(*opt.tls);
    if (!context.ok()) return context.status();
    impl_->shared->tls = *std::move(context);
  }
  impl_->ioc.emplace(std::max(1, opt.io_threads));
  impl_->listener = std::make_shared<Listener>(*impl_->ioc, impl_->shared);
  Status st = impl_->listener->Open(tcp::endpoint(address, opt.port));
  if (!st.ok()) {
    impl_->listener.reset();
    impl_->ioc.reset();
    return st;
  }
  impl_->port = impl_->listener->port();
  impl_->started = true;
  impl_->work.emplace(impl_->ioc->get_executor());
  impl_->listener->Run();
  for (int i = 0; i < std::max(1, opt.io_threads); ++i) {
    impl_->threads.emplace_back([ioc = &*impl_->ioc] {
      for (;;) {
        try {
          ioc->run();
          return;
        } catch (...) {
          // A handler threw past every catch: keep serving.
        }
      }
    });
  }
  if (opt.on_listening) opt.on_listening(impl_->port);
  return Status::Ok();
}

void HttpServer::Stop() {
  if (!impl_->started || impl_->stopped) return;
  impl_->stopped = true;
  Shared& shared = *impl_->shared;
  std::vector<std::shared_ptr<Session>> sessions;
  {
    std::lock_guard lock(shared.mu);
    shared.stopping = true;
    shared.stopping_flag.store(true);
    sessions = impl_->LiveSessions();
  }
  impl_->listener->Close();
  for (auto& s : sessions) s->Shutdown();
  sessions.clear();  // the sessions must be able to die

  std::unique_lock lock(shared.mu);
  bool drained = shared.cv.wait_for(lock, shared.options.shutdown_grace,
                                    [&] { return shared.sessions.empty(); });
  if (!drained) {
    sessions = impl_->LiveSessions();

    lock.unlock();
    for (auto& s : sessions) s->ForceClose();
    sessions.clear();
    lock.lock();
    shared.cv.wait_for(lock, std::chrono::seconds(1), [&] { return shared.sessions.empty(); });
  }
  lock.unlock();
  impl_->work.reset();
  impl_->ioc->stop();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
}

uint16_t HttpServer::port() const { return impl_->port; }

size_t HttpServer::open_connections() const {
  std::lock_guard lock(impl_->shared->mu);
  return impl_->shared->sessions.size();
}

}  // namespace tessera::api
