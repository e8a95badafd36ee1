// HttpServer (see http_server.hpp): our own listening socket handed to libmicrohttpd in
// external-epoll mode; one io source on MHD's epoll fd plus one timer re-armed from
// MHD_get_timeout() after every MHD_run() drive it from the sd-event loop. Parked requests are
// MHD-suspended connections, resumed by answer().
#include "daemon/platform/http_server.hpp"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "daemon/platform/unique_fd.hpp"

namespace fo::platform {
namespace {

constexpr int kListenBacklog = 64;

std::optional<uint16_t> parse_port(std::string_view s) {
  if (s.empty() || s.size() > 5) return std::nullopt;
  unsigned v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + unsigned(c - '0');
  }
  if (v > 65535) return std::nullopt;
  return uint16_t(v);
}

void ignore_sigpipe() {
  // No MHD thread masks SIGPIPE in external mode, and a client that hangs up mid-reply must
  // not kill the daemon. Only a default disposition is replaced; a caller's handler stays.
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, nullptr);
  }
}

HttpReply internal_error() {
  return HttpReply{500, "text/plain; charset=utf-8", "internal server error\n", {}};
}

}  // namespace

std::optional<ListenAddress> parse_listen(std::string_view text) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto port = parse_port(text.substr(colon + 1));
  if (!port) return std::nullopt;
  std::string_view host = text.substr(0, colon);
  ListenAddress out;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    auto* a = reinterpret_cast<sockaddr_in6*>(&out.addr);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(*port);
    if (inet_pton(AF_INET6, std::string(host.substr(1, host.size() - 2)).c_str(), &a->sin6_addr) !=
        1)
      return std::nullopt;
    out.len = sizeof(sockaddr_in6);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&out.addr);
    a->sin_family = AF_INET;
    a->sin_port = htons(*port);
    if (inet_pton(AF_INET, std::string(host).c_str(), &a->sin_addr) != 1) return std::nullopt;
    out.len = sizeof(sockaddr_in);
  }
  return out;
}

std::optional<std::string_view> HttpRequest::header(const char* name) const {
  const char* v = MHD_lookup_connection_value(connection_, MHD_HEADER_KIND, name);
  if (!v) return std::nullopt;
  return std::string_view(v);
}

std::optional<uint64_t> HttpRequest::content_length() const {
  const char* v =
      MHD_lookup_connection_value(connection_, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
  if (!v) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (errno != 0) return UINT64_MAX;
  return uint64_t(n);
}

// MHD's per-connection pointer for one request; freed in MHD's completion callback.
struct HttpServer::Connection {
  uint64_t id = 0;
  MHD_Connection* mhd = nullptr;
  std::string body;
  bool too_large = false;
  bool parked = false;             // answer_later, suspended until answer()
  std::optional<HttpReply> reply;  // from answer(), sent on the next MHD call
};

// The C side of libmicrohttpd, with access to the server's privates.
struct HttpGlue {
  using Connection = HttpServer::Connection;

  static MHD_Result send(MHD_Connection* c, HttpReply reply) {
    auto* body = new std::string(std::move(reply.body));
    MHD_Response* r = MHD_create_response_from_buffer_with_free_callback_cls(
        body->size(), body->data(), [](void* p) { delete static_cast<std::string*>(p); }, body);
    if (!r) {
      delete body;
      return MHD_NO;
    }
    if (!reply.content_type.empty())
      MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, reply.content_type.c_str());
    for (const auto& [name, value] : reply.headers)
      MHD_add_response_header(r, name.c_str(), value.c_str());
    const MHD_Result rc = MHD_queue_response(c, reply.status, r);
    MHD_destroy_response(r);
    return rc;
  }

  static HttpReply too_large(HttpServer& self) {
    ++self.too_large_;
    HttpReply r = self.options_.too_large;
    r.status = MHD_HTTP_CONTENT_TOO_LARGE;
    return r;
  }

  static MHD_Result on_request(void* cls, MHD_Connection* c, const char* url, const char* method,
                               const char* /*version*/, const char* upload, size_t* upload_size,
                               void** con_cls) {
    auto* self = static_cast<HttpServer*>(cls);
    auto* conn = static_cast<Connection*>(*con_cls);
    HttpRequest request;
    request.method = method ? method : "";
    request.path = url ? url : "";
    request.connection_ = c;
    if (!conn) {
      conn = new Connection();
      conn->id = self->next_id_++;
      conn->mhd = c;
      *con_cls = conn;
      request.id = conn->id;
      return dispatch(*self, *conn, self->call_handler(request, *conn), true);
    }
    if (conn->reply) {
      *upload_size = 0;  // answered: whatever else the client sends is not read
      HttpReply reply = std::move(*conn->reply);
      conn->reply.reset();
      return send(c, std::move(reply));
    }
    if (conn->parked) return MHD_YES;  // resumed spuriously; the reply is not ready yet
    if (*upload_size > 0) {
      if (!conn->too_large && conn->body.size() + *upload_size <= self->options_.max_body_bytes) {
        conn->body.append(upload, *upload_size);
      } else {
        conn->too_large = true;
        conn->body.clear();
      }
      *upload_size = 0;
      return MHD_YES;
    }
    if (conn->too_large) return send(c, too_large(*self));
    request.id = conn->id;
    request.body_read = true;
    request.body = conn->body;
    HttpAnswer answer = self->call_handler(request, *conn);
    conn->body.clear();
    conn->body.shrink_to_fit();
    return dispatch(*self, *conn, std::move(answer), false);
  }

  static MHD_Result dispatch(HttpServer& self, Connection& conn, HttpAnswer answer,
                             bool first_call) {
    if (auto* reply = std::get_if<HttpReply>(&answer)) return send(conn.mhd, std::move(*reply));
    if (std::get<HttpNext>(answer) == HttpNext::read_body) {
      if (!first_call) {
        ++self.errors_;
        self.log_limited(true, "handler asked for the body twice");
        return send(conn.mhd, internal_error());
      }
      HttpRequest request;
      request.connection_ = conn.mhd;
      if (const auto length = request.content_length();
          length && *length > self.options_.max_body_bytes)
        return send(conn.mhd, too_large(self));
      return MHD_YES;
    }
    if (conn.reply) {  // answered from inside the handler call
      HttpReply reply = std::move(*conn.reply);
      conn.reply.reset();
      return send(conn.mhd, std::move(reply));
    }
    conn.parked = true;
    self.parked_.emplace(conn.id, &conn);
    MHD_suspend_connection(conn.mhd);
    return MHD_YES;
  }

  static void on_completed(void* cls, MHD_Connection*, void** con_cls, MHD_RequestTerminationCode) {
    auto* self = static_cast<HttpServer*>(cls);
    auto* conn = static_cast<Connection*>(*con_cls);
    if (!conn) return;
    self->parked_.erase(conn->id);
    delete conn;
    *con_cls = nullptr;
  }

  static void log(void* cls, const char* fmt, va_list ap) {
    char buf[512];
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    std::string_view text(buf);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
    static_cast<HttpServer*>(cls)->log_limited(false, text);
  }

  static int on_io(sd_event_source*, int, uint32_t, void* userdata) {
    static_cast<HttpServer*>(userdata)->run();
    return 0;
  }
};

void HttpServer::MhdStop::operator()(MHD_Daemon* d) const {
  MHD_stop_daemon(d);
}

HttpServer::HttpServer(sd_event* event, const std::string& listen, Handler handler,
                       HttpServerOptions options)
    : handler_(std::move(handler)), options_(std::move(options)) {
  const auto addr = parse_listen(listen);
  if (!addr)
    throw std::invalid_argument("invalid listen address '" + listen +
                                "' (expected ADDR:PORT, e.g. 127.0.0.1:9772 or [::1]:9772)");
  const bool tls = !options_.tls_cert_pem.empty() && !options_.tls_key_pem.empty();
  if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
    throw std::runtime_error("cannot listen on " + listen +
                             ": this libmicrohttpd has no TLS support");
  const int family = addr->addr.ss_family;
  UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  const auto fail = [&](const char* what) {
    throw std::runtime_error("cannot listen on " + listen + ": " + what + std::strerror(errno));
  };
  if (fd.get() < 0) fail("socket: ");
  const int one = 1;
  // A restarted daemon must not wait for the old connections' TIME_WAIT to end.
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0) fail("");
  if (family == AF_INET6 && ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0)
    fail("");
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr->addr), addr->len) < 0) fail("");
  if (::listen(fd.get(), kListenBacklog) < 0) fail("");
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof bound;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &bound_len) < 0) fail("");
  port_ = ntohs(family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                   : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);

  ignore_sigpipe();
  unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
  if (family == AF_INET6) flags |= MHD_USE_IPv6;
  if (tls) flags |= MHD_USE_TLS;
  const unsigned limit = std::max(1u, options_.max_connections);
  const unsigned timeout_s =
      unsigned(std::clamp<int64_t>(options_.connection_timeout.count(), 1, 3600));
  // The logger goes first, or MHD reports the options before it on stderr. The TLS options
  // close the list early when there is no TLS (MHD rejects empty certificates).
  MHD_Daemon* d = MHD_start_daemon(
      flags, 0, nullptr, nullptr, &HttpGlue::on_request, this, MHD_OPTION_EXTERNAL_LOGGER,
      &HttpGlue::log, this, MHD_OPTION_LISTEN_SOCKET, fd.get(), MHD_OPTION_CONNECTION_LIMIT, limit,
      MHD_OPTION_CONNECTION_TIMEOUT, timeout_s, MHD_OPTION_NOTIFY_COMPLETED,
      &HttpGlue::on_completed, this, tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END,
      options_.tls_cert_pem.c_str(), MHD_OPTION_HTTPS_MEM_KEY, options_.tls_key_pem.c_str(),
      MHD_OPTION_END);
  if (!d)
    throw std::runtime_error("cannot listen on " + listen + ": libmicrohttpd did not start" +
                             (tls ? " (check tls_cert and tls_key)" : ""));
  fd.release();  // MHD closes it in MHD_stop_daemon
  daemon_.reset(d);

  const MHD_DaemonInfo* info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD);
  if (!info) throw std::runtime_error("cannot listen on " + listen + ": no epoll fd from MHD");
  sd_event_source* src = nullptr;
  if (int r = sd_event_add_io(event, &src, info->epoll_fd, EPOLLIN, &HttpGlue::on_io, this); r < 0)
    throw std::system_error(-r, std::generic_category(), "http server: sd_event_add_io");
  io_.reset(src);
  timer_ = std::make_unique<Timer>(event, [this] { run(); });
  run();
}

HttpServer::~HttpServer() {
  // Sources first: MHD_stop_daemon closes the epoll fd they watch.
  timer_.reset();
  io_.reset();
  // MHD may only stop with no connection suspended.
  for (const auto& [id, conn] : parked_) MHD_resume_connection(conn->mhd);
  parked_.clear();
  daemon_.reset();
}

bool HttpServer::answer(uint64_t id, HttpReply reply) {
  if (current_ && current_->id == id) {
    current_->reply = std::move(reply);
    return true;
  }
  const auto it = parked_.find(id);
  if (it == parked_.end()) return false;
  Connection* conn = it->second;
  parked_.erase(it);
  conn->parked = false;
  conn->reply = std::move(reply);
  MHD_resume_connection(conn->mhd);
  // MHD only looks at a resumed connection in its next MHD_run.
  timer_->arm_in(Millis(0));
  return true;
}

HttpAnswer HttpServer::call_handler(const HttpRequest& request, Connection& conn) {
  current_ = &conn;
  struct Reset {
    Connection*& p;
    ~Reset() { p = nullptr; }
  } reset{current_};
  try {
    return handler_(request);
  } catch (const std::exception& e) {
    ++errors_;
    log_limited(true, std::string("handler failed: ") + e.what());
  } catch (...) {
    ++errors_;
    log_limited(true, "handler failed");
  }
  return internal_error();
}

void HttpServer::log_limited(bool error, std::string_view text) {
  const auto now = std::chrono::steady_clock::now();
  if (now - log_window_start_ > std::chrono::minutes(1)) {
    log_window_start_ = now;
    log_lines_ = 0;
  }
  if (++log_lines_ > options_.max_log_lines_per_minute) return;
  if (error)
    spdlog::error("{}: {}", options_.log_prefix, text);
  else
    spdlog::warn("{}: {}", options_.log_prefix, text);
}

void HttpServer::run() {
  MHD_Daemon* d = daemon_.get();
  const auto connections = [d] {
    const MHD_DaemonInfo* i = MHD_get_daemon_info(d, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return i ? i->num_connections : 0u;
  };
  const unsigned before = connections();
  MHD_run(d);
  // At the connection limit MHD takes the listen socket out of its epoll set and puts it back
  // only at the start of a later MHD_run; after a slot frees up nothing would wake us for the
  // clients waiting in the backlog (measured: they waited for the next connection timeout).
  if (connections() < before) MHD_run(d);
  MHD_UNSIGNED_LONG_LONG ms = 0;
  if (MHD_get_timeout(d, &ms) == MHD_YES)
    timer_->arm_in(Millis(std::min<MHD_UNSIGNED_LONG_LONG>(ms, 3600 * 1000)));
  else
    timer_->disarm();
}

}  // namespace fo::platform
