// MetricsServer: our own listening socket (exact bind errors, port 0), handed to libmicrohttpd
// running in external-epoll mode; one io source on MHD's epoll fd plus one timer re-armed from
// MHD_get_timeout() after every MHD_run() drive it from the sd-event loop.
#include "daemon/metrics/server.hpp"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace fo::metrics {
namespace {

constexpr int kListenBacklog = 64;
// MHD messages are mostly caused by clients; bound what they can make us log.
constexpr int kMaxLogLinesPerMinute = 10;

class UniqueFd {
 public:
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

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
  // No MHD thread masks SIGPIPE in external mode, and a scraper that hangs up mid-reply must
  // not kill the daemon. Only a default disposition is replaced; a caller's handler stays.
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, nullptr);
  }
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

// The C side of libmicrohttpd, with access to the server's privates.
struct ServerGlue {
  static MHD_Result on_request(void* cls, MHD_Connection* connection, const char* url,
                               const char* method, const char* /*version*/,
                               const char* /*upload_data*/, size_t* /*upload_data_size*/,
                               void** /*con_cls*/) {
    auto* self = static_cast<MetricsServer*>(cls);
    // Answer on the first call, before any request body: nothing here accepts a body, and MHD
    // closes the connection after an early reply instead of reading what the client sends.
    MetricsServer::Reply reply = self->handle(url ? url : "", method ? method : "");
    auto* body = new std::string(std::move(reply.body));
    MHD_Response* response = MHD_create_response_from_buffer_with_free_callback_cls(
        body->size(), body->data(), [](void* p) { delete static_cast<std::string*>(p); }, body);
    if (!response) {
      delete body;
      return MHD_NO;
    }
    const bool ok = reply.status == MHD_HTTP_OK;
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE,
                            ok ? kContentType.data() : "text/plain; charset=utf-8");
    if (reply.status == MHD_HTTP_METHOD_NOT_ALLOWED)
      MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    const MHD_Result r = MHD_queue_response(connection, reply.status, response);
    MHD_destroy_response(response);
    return r;
  }

  static void log(void* cls, const char* fmt, va_list ap) {
    auto* self = static_cast<MetricsServer*>(cls);
    const auto now = std::chrono::steady_clock::now();
    if (now - self->log_window_start_ > std::chrono::minutes(1)) {
      self->log_window_start_ = now;
      self->log_lines_ = 0;
    }
    if (++self->log_lines_ > kMaxLogLinesPerMinute) return;
    char buf[512];
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    std::string_view text(buf);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
    spdlog::warn("metrics endpoint: {}", text);
  }

  static int on_io(sd_event_source*, int, uint32_t, void* userdata) {
    static_cast<MetricsServer*>(userdata)->run();
    return 0;
  }
};

void MetricsServer::MhdStop::operator()(MHD_Daemon* d) const {
  MHD_stop_daemon(d);
}

MetricsServer::MetricsServer(sd_event* event, const std::string& listen, Render render,
                             ServerLimits limits)
    : render_(std::move(render)) {
  const auto addr = parse_listen(listen);
  if (!addr)
    throw std::invalid_argument("metrics: invalid listen address '" + listen +
                                "' (expected ADDR:PORT, e.g. 127.0.0.1:9772 or [::1]:9772)");
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
  MHD_Daemon* d = MHD_start_daemon(
      MHD_USE_EPOLL | MHD_USE_ERROR_LOG | (family == AF_INET6 ? MHD_USE_IPv6 : 0), 0, nullptr,
      nullptr, &ServerGlue::on_request, this,
      // The logger goes first, or MHD reports the options before it on stderr.
      MHD_OPTION_EXTERNAL_LOGGER, &ServerGlue::log, this, MHD_OPTION_LISTEN_SOCKET, fd.get(),
      MHD_OPTION_CONNECTION_LIMIT, std::max(1u, limits.max_connections),
      MHD_OPTION_CONNECTION_TIMEOUT,
      unsigned(std::clamp<int64_t>(limits.connection_timeout.count(), 1, 3600)), MHD_OPTION_END);
  if (!d) throw std::runtime_error("cannot listen on " + listen + ": libmicrohttpd did not start");
  fd.release();  // MHD closes it in MHD_stop_daemon
  daemon_.reset(d);

  const MHD_DaemonInfo* info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD);
  if (!info) throw std::runtime_error("cannot listen on " + listen + ": no epoll fd from MHD");
  sd_event_source* src = nullptr;
  if (int r = sd_event_add_io(event, &src, info->epoll_fd, EPOLLIN, &ServerGlue::on_io, this);
      r < 0)
    throw std::system_error(-r, std::generic_category(), "metrics: sd_event_add_io");
  io_.reset(src);
  timer_ = std::make_unique<platform::Timer>(event, [this] { run(); });
  run();
}

MetricsServer::~MetricsServer() {
  // Sources first: MHD_stop_daemon closes the epoll fd they watch.
  timer_.reset();
  io_.reset();
  daemon_.reset();
}

MetricsServer::Reply MetricsServer::handle(std::string_view url, std::string_view method) {
  Reply reply;
  if (url != "/metrics") {
    reply.status = MHD_HTTP_NOT_FOUND;
    reply.body = "not found; metrics are at /metrics\n";
  } else if (method != MHD_HTTP_METHOD_GET && method != MHD_HTTP_METHOD_HEAD) {
    reply.status = MHD_HTTP_METHOD_NOT_ALLOWED;
    reply.body = "method not allowed; use GET\n";
  } else {
    try {
      reply.body = render_();
      ++served_;
      return reply;
    } catch (const std::exception& e) {
      spdlog::error("metrics endpoint: rendering failed: {}", e.what());
      reply.status = MHD_HTTP_INTERNAL_SERVER_ERROR;
      reply.body = "rendering the metrics failed\n";
    } catch (...) {
      spdlog::error("metrics endpoint: rendering failed");
      reply.status = MHD_HTTP_INTERNAL_SERVER_ERROR;
      reply.body = "rendering the metrics failed\n";
    }
  }
  ++rejected_;
  return reply;
}

void MetricsServer::run() {
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
    timer_->arm_in(core::Millis(std::min<MHD_UNSIGNED_LONG_LONG>(ms, 3600 * 1000)));
  else
    timer_->disarm();
}

}  // namespace fo::metrics
