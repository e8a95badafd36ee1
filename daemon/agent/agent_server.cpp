// Agent HTTP server (see agent_server.hpp): routing, authentication, admission and the probe
// runs; the HTTP side (limits, 413 for bodies over the cap, parking a request until its probes
// are done) is platform::HttpServer.
#include "daemon/agent/agent_server.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace fo::agent {
namespace {

using nlohmann::json;
using platform::HttpAnswer;
using platform::HttpNext;
using platform::HttpReply;
using platform::HttpRequest;
namespace wire = probes::agent;

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

HttpReply json_reply(unsigned status, std::string body, unsigned retry_after = 0,
                     const char* allow = "POST") {
  HttpReply r;
  r.status = status;
  r.content_type = "application/json";
  r.body = std::move(body);
  if (retry_after > 0) r.headers.emplace_back("Retry-After", std::to_string(retry_after));
  if (status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  if (status == 405) r.headers.emplace_back("Allow", allow);
  return r;
}

std::string error_json(const std::string& why) {
  return json{{"version", wire::kProtocolVersion}, {"error", why}}.dump(
             -1, ' ', false, json::error_handler_t::replace) +
         "\n";
}

std::string too_large_json(std::size_t max) {
  return error_json("request larger than " + std::to_string(max) + " bytes");
}

}  // namespace

// One admitted POST /v1/probe while its probes run.
struct AgentServer::Request {
  ProbeRequest parsed;
  std::vector<std::optional<probes::ProbeResult>> results;
  std::size_t outstanding = 0;
  std::unique_ptr<platform::Timer> deadline;
};

AgentServer::AgentServer(sd_event* event, probes::ProbeDispatcher& probes,
                         AgentServerOptions options)
    : event_(event), probes_(probes), options_(std::move(options)) {
  if (!probes::agent::token_problem(options_.token).empty())
    throw std::runtime_error("agent: the token " + probes::agent::token_problem(options_.token));
  if (!platform::parse_listen(options_.listen))
    throw std::runtime_error("agent: invalid listen address '" + options_.listen + "'");
  tokens_ = std::max(1.0, options_.max_requests_per_second);
  refilled_ = std::chrono::steady_clock::now();
  platform::HttpServerOptions http;
  http.max_connections = options_.max_concurrent_requests + kExtraConnections;
  http.connection_timeout = options_.connection_timeout;
  http.max_body_bytes = options_.max_request_bytes;
  http.too_large = json_reply(413, too_large_json(options_.max_request_bytes));
  http.tls_cert_pem = options_.tls_cert_pem;
  http.tls_key_pem = options_.tls_key_pem;
  http.log_prefix = "agent: http";
  http.max_log_lines_per_minute = kMaxLogLinesPerMinute;
  http_ = std::make_unique<platform::HttpServer>(
      event, options_.listen, [this](const HttpRequest& r) { return handle(r); }, std::move(http));
}

AgentServer::~AgentServer() = default;

AgentServerStats AgentServer::stats() const {
  AgentServerStats s = stats_;
  s.too_large += http_->too_large();  // chunked bodies that grew over the cap
  return s;
}

HttpAnswer AgentServer::handle(const HttpRequest& request) {
  return request.body_read ? on_body(request) : on_headers(request);
}

HttpAnswer AgentServer::on_headers(const HttpRequest& request) {
  if (request.path == wire::kHealthPath) {
    if (request.method != "GET" && request.method != "HEAD") {
      ++stats_.invalid;
      return json_reply(405, error_json("use GET"), 0, "GET, HEAD");
    }
    return json_reply(200,
                      json{{"version", wire::kProtocolVersion}, {"status", "ok"}}.dump() + "\n");
  }
  if (request.path != wire::kProbePath) {
    ++stats_.invalid;
    return json_reply(404, error_json("not found; use POST /v1/probe"));
  }
  if (request.method != "POST") {
    ++stats_.invalid;
    return json_reply(405, error_json("use POST"));
  }
  const auto auth = request.header("Authorization");
  const std::string_view given = auth.value_or("");
  const bool bearer = given.substr(0, 7) == "Bearer ";
  if (!bearer || !same_token(options_.token, given.substr(7))) {
    ++stats_.unauthorized;
    log_limited(std::string("refused a probe request: ") +
                (auth ? "wrong bearer token" : "no Authorization header"));
    return json_reply(401, error_json("missing or wrong bearer token"));
  }
  // Checked here, not only by HttpServer, so that an oversized request is refused before it
  // takes an admission slot or a rate token.
  if (const auto length = request.content_length();
      length && *length > options_.max_request_bytes) {
    ++stats_.too_large;
    return json_reply(413, too_large_json(options_.max_request_bytes));
  }
  if (active_ >= options_.max_concurrent_requests) {
    ++stats_.overloaded;
    log_limited("overloaded: " + std::to_string(active_) +
                " probe requests running; answering 503");
    return json_reply(503, error_json("overloaded: too many requests at once"), 1);
  }
  unsigned retry_after = 0;
  if (!admit_rate(retry_after)) {
    ++stats_.overloaded;
    log_limited("over the request rate; answering 503");
    return json_reply(503, error_json("overloaded: over the request rate"), retry_after);
  }
  return HttpNext::read_body;
}

HttpAnswer AgentServer::on_body(const HttpRequest& request) {
  RequestLimits limits;
  limits.max_probes = options_.max_probes_per_request;
  limits.allow_exec = options_.allow_exec;
  ProbeRequest parsed = parse_probe_request(request.body, limits);
  if (parsed.status != 200) {
    ++stats_.invalid;
    log_limited("refused a probe request (" + std::to_string(parsed.status) + "): " + parsed.error);
    return json_reply(parsed.status, error_json(parsed.error));
  }
  start_probes(request.id, std::move(parsed));
  return HttpNext::answer_later;
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

void AgentServer::start_probes(uint64_t id, ProbeRequest parsed) {
  ++active_;
  auto owned = std::make_unique<Request>();
  Request& req = *owned;
  running_.emplace(id, std::move(owned));
  req.parsed = std::move(parsed);
  const std::size_t n = req.parsed.probes.size();
  req.results.assign(n, std::nullopt);
  req.outstanding = n;
  req.deadline = std::make_unique<platform::Timer>(event_, [this, id] { complete(id); });
  req.deadline->arm_in(req.parsed.deadline);
  std::weak_ptr<bool> alive = alive_;
  for (std::size_t i = 0; i < n; ++i) {
    config::Probe& probe = req.parsed.probes[i].probe;
    cap_timeout(probe, req.parsed.deadline);
    probes_.start(probe, options_.location, [this, alive, id, i](probes::ProbeResult r) {
      if (alive.expired()) return;
      const auto it = running_.find(id);
      if (it == running_.end()) return;  // answered at its deadline already
      Request& req = *it->second;
      req.results[i] = std::move(r);
      if (--req.outstanding == 0) complete(id);
    });
  }
}

void AgentServer::complete(uint64_t id) {
  const auto it = running_.find(id);
  if (it == running_.end()) return;
  const std::unique_ptr<Request> req = std::move(it->second);
  running_.erase(it);
  json results = json::array();
  for (std::size_t i = 0; i < req->results.size(); ++i) {
    // A check that did not end in time (or never ran) has no result: the daemon counts it
    // as missing, not as failed.
    if (!req->results[i] || req->results[i]->missing) continue;
    const auto& w = req->parsed.probes[i];
    results.push_back(wire::result_to_json({w.site, w.probe.name, *req->results[i]}));
  }
  std::string reply = json{{"version", wire::kProtocolVersion},
                           {"round", req->parsed.round},
                           {"results", std::move(results)}}
                          .dump(-1, ' ', false, json::error_handler_t::replace) +
                      "\n";
  --active_;
  ++stats_.answered;
  http_->answer(id, json_reply(200, std::move(reply)));
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
