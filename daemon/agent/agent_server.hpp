// The HTTP(S) side of `failoverd --agent`: POST /v1/probe and GET /v1/health served by
// platform::HttpServer (libmicrohttpd on the sd-event loop, as daemon/metrics/server.*). A probe
// request is authenticated (bearer token, constant-time compare), admitted (concurrency limit
// and token-bucket rate, else 503 + Retry-After), size-capped (413), validated (400/403), then
// its connection is parked while the agent's own ProbeDispatcher runs the probes, and resumed
// with the results at the request's deadline at the latest. Protocol: docs/agent-protocol.md.
#pragma once

#include <systemd/sd-event.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "daemon/agent/agent_request.hpp"
#include "daemon/config/config.hpp"
#include "daemon/platform/event.hpp"
#include "daemon/platform/http_server.hpp"
#include "probes/dispatcher.hpp"

namespace fo::agent {

struct AgentServerOptions {
  std::string listen;  // "IP:PORT" / "[v6]:PORT"; port 0 picks a free one
  std::string token;   // the bearer token requests must carry
  bool allow_exec = false;
  std::size_t max_request_bytes = 64 * 1024;
  std::size_t max_probes_per_request = 256;
  unsigned max_concurrent_requests = 8;
  double max_requests_per_second = 20;
  std::string tls_cert_pem;  // both set: HTTPS
  std::string tls_key_pem;
  config::Location location;  // where the probes run from (name, source address, interface)
  std::chrono::seconds connection_timeout{10};
};

struct AgentServerStats {
  uint64_t answered = 0;      // 200 to POST /v1/probe
  uint64_t unauthorized = 0;  // 401
  uint64_t too_large = 0;     // 413
  uint64_t invalid = 0;       // 400, 403, 404, 405
  uint64_t overloaded = 0;    // 503
};

class AgentServer {
 public:
  // Binds and listens at once. Throws std::runtime_error on start-up problems ("cannot listen on
  // ...: Address already in use"). `probes` must outlive the server.
  AgentServer(sd_event* event, probes::ProbeDispatcher& probes, AgentServerOptions options);
  ~AgentServer();
  AgentServer(const AgentServer&) = delete;
  AgentServer& operator=(const AgentServer&) = delete;

  uint16_t port() const { return http_->port(); }
  AgentServerStats stats() const;
  // Probe requests admitted and not yet answered.
  unsigned active() const { return active_; }

 private:
  struct Request;

  platform::HttpAnswer handle(const platform::HttpRequest& request);
  platform::HttpAnswer on_headers(const platform::HttpRequest& request);
  platform::HttpAnswer on_body(const platform::HttpRequest& request);
  // Token bucket: true if a request may start now; otherwise the seconds to wait.
  bool admit_rate(unsigned& retry_after_s);
  void start_probes(uint64_t id, ProbeRequest parsed);
  void complete(uint64_t id);
  void log_limited(const std::string& line);

  sd_event* event_;
  probes::ProbeDispatcher& probes_;
  AgentServerOptions options_;
  AgentServerStats stats_;  // too_large: only those refused by Content-Length, see stats()
  unsigned active_ = 0;
  double tokens_ = 0;
  std::chrono::steady_clock::time_point refilled_{};
  std::chrono::steady_clock::time_point log_window_{};
  int log_lines_ = 0;
  // Admitted probe requests by HttpServer request id, until answered.
  std::unordered_map<uint64_t, std::unique_ptr<Request>> running_;
  // Probe callbacks may come after the server is gone; they check this first.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::unique_ptr<platform::HttpServer> http_;  // last: stopped before the state above goes
};

}  // namespace fo::agent
