// Agent HTTP server (see agent_server.hpp). MHD glue as in daemon/metrics/server.cpp: our own
// listening socket, MHD in external-epoll mode, one io source on its epoll fd and one timer
// re-armed from MHD_get_timeout(); plus suspend/resume for the asynchronous probe replies.
#include "daemon/agent/agent_server.hpp"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include <nlohmann/json.hpp>

#include "daemon/agent/agent_request.hpp"
#include "daemon/metrics/server.hpp"

namespace fo::agent {
namespace {

using nlohmann::json;
namespace wire = probes::agent;

constexpr int kListenBacklog = 64;
constexpr int kMaxLogLinesPerMinute = 20;
// Beyond the admitted requests, room for connections that only get a quick 401/413/503.
constexpr unsigned kExtraConnections = 16;

// Time depends only on the expected token's length, never on where a guess goes wrong.
bool same_token(std::string_view expected, std::string_view given) {
  volatile unsigned char diff = expected.size() != given.size() ? 1 : 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff = diff | (static_cast<unsigned char>(expected[i]) ^ g);
  }
  return diff == 0 && !expected.empty();
}

// The probe may not outlast the request: a check still running after the reply went out is
// load nobody waits for.
void cap_timeout(config::Probe& p, core::Millis limit) {
  for (core::Millis* t :
       {&p.http.timeout, &p.tcp.timeout, &p.dns.timeout, &p.postgres.timeout, &p.exec.timeout})
    *t = std::min(*t, limit);
}

struct UniqueFd {
  int fd;
  explicit UniqueFd(int f) : fd(f) {}
  ~UniqueFd() {
    if (fd >= 0) ::close(fd);
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
};

}  // namespace

// One HTTP request; MHD's per-connection pointer. Freed in MHD's completion callback.
struct AgentServer::Request {
  AgentServer* server = nullptr;
  MHD_Connection* connection = nullptr;
  bool probe = false;  // an admitted POST /v1/probe
  std::string body;
  bool too_large = false;
  // Running probes. `alive` tells probe callbacks whether this request still exists.
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);
  ProbeRequest parsed;
  std::vector<std::optional<probes::ProbeResult>> results;
  std::size_t outstanding = 0;
  std::unique_ptr<platform::Timer> deadline;
  bool started = false;
  bool answered = false;  // reply is ready in `reply`
  std::string reply;
  ~Request() { *alive = false; }
};

struct AgentGlue {
  static MHD_Result send(MHD_Connection* c, unsigned status, const std::string& text,
                         unsigned retry_after = 0) {
    auto* body = new std::string(text);
    MHD_Response* r = MHD_create_response_from_buffer_with_free_callback_cls(
        body->size(), body->data(), [](void* p) { delete static_cast<std::string*>(p); }, body);
    if (!r) {
      delete body;
      return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    if (retry_after > 0)
      MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, std::to_string(retry_after).c_str());
    if (status == MHD_HTTP_UNAUTHORIZED)
      MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
      MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "POST");
    const MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
  }

  static std::string error_json(const std::string& why) {
    return json{{"version", wire::kProtocolVersion}, {"error", why}}.dump(
               -1, ' ', false, json::error_handler_t::replace) +
           "\n";
  }

  static MHD_Result on_request(void* cls, MHD_Connection* c, const char* url, const char* method,
                               const char*, const char* upload, size_t* upload_size,
                               void** con_cls) {
    auto* self = static_cast<AgentServer*>(cls);
    auto* req = static_cast<AgentServer::Request*>(*con_cls);
    if (!req) {
      req = new AgentServer::Request();
      req->server = self;
      req->connection = c;
      *con_cls = req;
      return first_call(*self, *req, url ? url : "", method ? method : "");
    }
    if (*upload_size > 0) {
      if (!req->too_large && req->body.size() + *upload_size <= self->options_.max_request_bytes)
        req->body.append(upload, *upload_size);
      else
        req->too_large = true;
      *upload_size = 0;
      return MHD_YES;
    }
    if (req->answered) {
      ++self->stats_.answered;
      return send(c, MHD_HTTP_OK, req->reply);
    }
    if (req->started) return MHD_YES;  // resumed spuriously; the reply is not ready yet
    if (req->too_large) {
      ++self->stats_.too_large;
      return send(c, MHD_HTTP_CONTENT_TOO_LARGE,
                  error_json("request larger than " +
                             std::to_string(self->options_.max_request_bytes) + " bytes"));
    }
    RequestLimits limits;
    limits.max_probes = self->options_.max_probes_per_request;
    limits.allow_exec = self->options_.allow_exec;
    req->parsed = parse_probe_request(req->body, limits);
    req->body.clear();
    req->body.shrink_to_fit();
    if (req->parsed.status != 200) {
      ++self->stats_.invalid;
      self->log_limited("refused a probe request (" + std::to_string(req->parsed.status) +
                        "): " + req->parsed.error);
      return send(c, req->parsed.status, error_json(req->parsed.error));
    }
    self->start_probes(*req);
    return MHD_YES;
  }

  static MHD_Result first_call(AgentServer& self, AgentServer::Request& req, std::string_view url,
                               std::string_view method) {
    MHD_Connection* c = req.connection;
    if (url == wire::kHealthPath) {
      if (method != MHD_HTTP_METHOD_GET && method != MHD_HTTP_METHOD_HEAD) {
        ++self.stats_.invalid;
        return send(c, MHD_HTTP_METHOD_NOT_ALLOWED, error_json("use GET"));
      }
      return send(c, MHD_HTTP_OK,
                  json{{"version", wire::kProtocolVersion}, {"status", "ok"}}.dump() + "\n");
    }
    if (url != wire::kProbePath) {
      ++self.stats_.invalid;
      return send(c, MHD_HTTP_NOT_FOUND, error_json("not found; use POST /v1/probe"));
    }
    if (method != MHD_HTTP_METHOD_POST) {
      ++self.stats_.invalid;
      return send(c, MHD_HTTP_METHOD_NOT_ALLOWED, error_json("use POST"));
    }
    const char* auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    std::string_view given = auth ? auth : "";
    const bool bearer = given.substr(0, 7) == "Bearer ";
    if (!bearer || !same_token(self.options_.token, given.substr(7))) {
      ++self.stats_.unauthorized;
      self.log_limited(std::string("refused a probe request: ") +
                       (auth ? "wrong bearer token" : "no Authorization header"));
      return send(c, MHD_HTTP_UNAUTHORIZED, error_json("missing or wrong bearer token"));
    }
    if (const char* length =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
      char* end = nullptr;
      errno = 0;
      const unsigned long long n = std::strtoull(length, &end, 10);
      if (errno != 0 || n > self.options_.max_request_bytes) {
        ++self.stats_.too_large;
        return send(c, MHD_HTTP_CONTENT_TOO_LARGE,
                    error_json("request larger than " +
                               std::to_string(self.options_.max_request_bytes) + " bytes"));
      }
    }
    if (self.active_ >= self.options_.max_concurrent_requests) {
      ++self.stats_.overloaded;
      self.log_limited("overloaded: " + std::to_string(self.active_) +
                       " probe requests running; answering 503");
      return send(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                  error_json("overloaded: too many requests at once"), 1);
    }
    unsigned retry_after = 0;
    if (!self.admit_rate(retry_after)) {
      ++self.stats_.overloaded;
      self.log_limited("over the request rate; answering 503");
      return send(c, MHD_HTTP_SERVICE_UNAVAILABLE, error_json("overloaded: over the request rate"),
                  retry_after);
    }
    req.probe = true;
    return MHD_YES;
  }

  static void on_completed(void* cls, MHD_Connection*, void** con_cls, MHD_RequestTerminationCode) {
    auto* self = static_cast<AgentServer*>(cls);
    auto* req = static_cast<AgentServer::Request*>(*con_cls);
    if (!req) return;
    if (req->started && !req->answered) --self->active_;
    self->suspended_.erase(req);
    delete req;
    *con_cls = nullptr;
  }

  static void log(void* cls, const char* fmt, va_list ap) {
    char buf[512];
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    std::string text(buf);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    static_cast<AgentServer*>(cls)->log_limited("http: " + text);
  }

  static int on_io(sd_event_source*, int, uint32_t, void* userdata) {
    static_cast<AgentServer*>(userdata)->run();
    return 0;
  }
};

void AgentServer::MhdStop::operator()(MHD_Daemon* d) const {
  MHD_stop_daemon(d);
}

AgentServer::AgentServer(sd_event* event, probes::ProbeDispatcher& probes,
                         AgentServerOptions options)
    : event_(event), probes_(probes), options_(std::move(options)) {
  if (!probes::agent::token_problem(options_.token).empty())
    throw std::runtime_error("agent: the token " + probes::agent::token_problem(options_.token));
  const auto addr = metrics::parse_listen(options_.listen);
  if (!addr) throw std::runtime_error("agent: invalid listen address '" + options_.listen + "'");
  const int family = addr->addr.ss_family;
  UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  const auto fail = [&] {
    throw std::runtime_error("cannot listen on " + options_.listen + ": " + std::strerror(errno));
  };
  const int one = 1;
  if (fd.fd < 0 || ::setsockopt(fd.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0) fail();
  if (family == AF_INET6 && ::setsockopt(fd.fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0)
    fail();
  if (::bind(fd.fd, reinterpret_cast<const sockaddr*>(&addr->addr), addr->len) < 0 ||
      ::listen(fd.fd, kListenBacklog) < 0)
    fail();
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof bound;
  if (::getsockname(fd.fd, reinterpret_cast<sockaddr*>(&bound), &bound_len) < 0) fail();
  port_ = ntohs(family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                   : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  {  // a daemon that hangs up mid-reply must not kill the agent (no MHD thread masks SIGPIPE)
    struct sigaction old {};
    if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
      struct sigaction ign {};
      ign.sa_handler = SIG_IGN;
      sigemptyset(&ign.sa_mask);
      sigaction(SIGPIPE, &ign, nullptr);
    }
  }
  const bool tls = !options_.tls_cert_pem.empty() && !options_.tls_key_pem.empty();
  if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
    throw std::runtime_error("agent: this libmicrohttpd has no TLS support");
  unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
  if (family == AF_INET6) flags |= MHD_USE_IPv6;
  if (tls) flags |= MHD_USE_TLS;
  tokens_ = std::max(1.0, options_.max_requests_per_second);
  refilled_ = std::chrono::steady_clock::now();
  const unsigned limit = options_.max_concurrent_requests + kExtraConnections;
  const unsigned timeout_s =
      unsigned(std::clamp<int64_t>(options_.connection_timeout.count(), 1, 3600));
  MHD_Daemon* d =
      tls ? MHD_start_daemon(flags, 0, nullptr, nullptr, &AgentGlue::on_request, this,
                             MHD_OPTION_EXTERNAL_LOGGER, &AgentGlue::log, this,
                             MHD_OPTION_LISTEN_SOCKET, fd.fd, MHD_OPTION_CONNECTION_LIMIT, limit,
                             MHD_OPTION_CONNECTION_TIMEOUT, timeout_s, MHD_OPTION_NOTIFY_COMPLETED,
                             &AgentGlue::on_completed, this, MHD_OPTION_HTTPS_MEM_CERT,
                             options_.tls_cert_pem.c_str(), MHD_OPTION_HTTPS_MEM_KEY,
                             options_.tls_key_pem.c_str(), MHD_OPTION_END)
          : MHD_start_daemon(flags, 0, nullptr, nullptr, &AgentGlue::on_request, this,
                             MHD_OPTION_EXTERNAL_LOGGER, &AgentGlue::log, this,
                             MHD_OPTION_LISTEN_SOCKET, fd.fd, MHD_OPTION_CONNECTION_LIMIT, limit,
                             MHD_OPTION_CONNECTION_TIMEOUT, timeout_s, MHD_OPTION_NOTIFY_COMPLETED,
                             &AgentGlue::on_completed, this, MHD_OPTION_END);
  if (!d)
    throw std::runtime_error("cannot listen on " + options_.listen +
                             ": libmicrohttpd did not start" +
                             (tls ? " (check tls_cert and tls_key)" : ""));
  fd.fd = -1;  // MHD closes it
  daemon_.reset(d);
  const MHD_DaemonInfo* info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD);
  if (!info) throw std::runtime_error("agent: no epoll fd from libmicrohttpd");
  sd_event_source* src = nullptr;
  if (int r = sd_event_add_io(event, &src, info->epoll_fd, EPOLLIN, &AgentGlue::on_io, this); r < 0)
    throw std::system_error(-r, std::generic_category(), "agent: sd_event_add_io");
  io_.reset(src);
  timer_ = std::make_unique<platform::Timer>(event, [this] { run(); });
  run();
}

AgentServer::~AgentServer() {
  timer_.reset();
  io_.reset();
  // MHD may only stop with no connection suspended.
  for (Request* r : suspended_) MHD_resume_connection(r->connection);
  suspended_.clear();
  daemon_.reset();
}

bool AgentServer::admit_rate(unsigned& retry_after_s) {
  const double rate = options_.max_requests_per_second;
  const double burst = std::max(1.0, rate);
  const auto now = std::chrono::steady_clock::now();
  tokens_ =
      std::min(burst, tokens_ + rate * std::chrono::duration<double>(now - refilled_).count());
  refilled_ = now;
  if (tokens_ >= 1.0) {
    tokens_ -= 1.0;
    return true;
  }
  retry_after_s = unsigned(std::max(1.0, std::ceil((1.0 - tokens_) / rate)));
  return false;
}

void AgentServer::start_probes(Request& req) {
  req.started = true;
  ++active_;
  const std::size_t n = req.parsed.probes.size();
  req.results.assign(n, std::nullopt);
  req.outstanding = n;
  req.deadline = std::make_unique<platform::Timer>(event_, [this, &req] { complete(req); });
  req.deadline->arm_in(req.parsed.deadline);
  MHD_suspend_connection(req.connection);
  suspended_.insert(&req);
  std::weak_ptr<bool> alive = req.alive;
  for (std::size_t i = 0; i < n; ++i) {
    config::Probe& probe = req.parsed.probes[i].probe;
    cap_timeout(probe, req.parsed.deadline);
    probes_.start(probe, options_.location, [this, alive, &req, i](probes::ProbeResult r) {
      if (alive.expired() || req.answered) return;
      req.results[i] = std::move(r);
      if (--req.outstanding == 0) complete(req);
    });
  }
}

void AgentServer::complete(Request& req) {
  if (req.answered) return;
  json results = json::array();
  for (std::size_t i = 0; i < req.results.size(); ++i) {
    // A check that did not end in time (or never ran) has no result: the daemon counts it
    // as missing, not as failed.
    if (!req.results[i] || req.results[i]->missing) continue;
    const auto& w = req.parsed.probes[i];
    results.push_back(wire::result_to_json({w.site, w.probe.name, *req.results[i]}));
  }
  req.reply = json{{"version", wire::kProtocolVersion},
                   {"round", req.parsed.round},
                   {"results", std::move(results)}}
                  .dump(-1, ' ', false, json::error_handler_t::replace) +
              "\n";
  req.answered = true;
  req.deadline->disarm();
  --active_;
  suspended_.erase(&req);
  MHD_resume_connection(req.connection);
  kick();
}

void AgentServer::kick() {
  timer_->arm_in(core::Millis(0));
}

void AgentServer::run() {
  MHD_Daemon* d = daemon_.get();
  const auto connections = [d] {
    const MHD_DaemonInfo* i = MHD_get_daemon_info(d, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return i ? i->num_connections : 0u;
  };
  const unsigned before = connections();
  MHD_run(d);
  // See MetricsServer::run: at the connection limit MHD only re-adds the listen socket at the
  // start of a later MHD_run.
  if (connections() < before) MHD_run(d);
  MHD_UNSIGNED_LONG_LONG ms = 0;
  if (MHD_get_timeout(d, &ms) == MHD_YES)
    timer_->arm_in(core::Millis(std::min<MHD_UNSIGNED_LONG_LONG>(ms, 3600 * 1000)));
  else
    timer_->disarm();
}

void AgentServer::log_limited(const std::string& line) {
  const auto now = std::chrono::steady_clock::now();
  if (now - log_window_ > std::chrono::minutes(1)) {
    log_window_ = now;
    log_lines_ = 0;
  }
  if (++log_lines_ > kMaxLogLinesPerMinute) return;
  spdlog::warn("agent: {}", line);
}

}  // namespace fo::agent
