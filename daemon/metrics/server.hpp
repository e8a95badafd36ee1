// HTTP endpoint for Prometheus: GET /metrics served by platform::HttpServer (libmicrohttpd on the
// daemon's sd-event loop, RECIPES.md §10.4), so the render callback runs on the loop thread and
// reads daemon state without locks.
#pragma once

#include <systemd/sd-event.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "daemon/platform/http_server.hpp"

namespace fo::metrics {

// A literal, so data() is NUL-terminated.
inline constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

// "127.0.0.1:9772" or "[::1]:9772": IP literals only (no name resolution), port 0..65535.
using platform::ListenAddress;
using platform::parse_listen;

struct ServerLimits {
  unsigned max_connections = 16;
  // Idle or unfinished connections are closed after this (MHD counts whole seconds).
  std::chrono::seconds connection_timeout{10};
};

class MetricsServer {
 public:
  // Returns the exposition text; called on the loop thread for every GET /metrics. It must not
  // destroy the server. An exception becomes a 500 reply.
  using Render = std::function<std::string()>;

  // Binds and listens at once. Throws std::runtime_error at start-up problems, e.g.
  // "cannot listen on 127.0.0.1:9772: Address already in use", and std::invalid_argument for a
  // malformed `listen` (the daemon does not create a server when metrics_listen is "").
  MetricsServer(sd_event* event, const std::string& listen, Render render,
                ServerLimits limits = ServerLimits());
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // The bound port (the kernel's choice when `listen` asked for port 0).
  uint16_t port() const { return http_.port(); }
  // Requests answered so far, by outcome (for the daemon's own logging and the tests).
  uint64_t served() const { return served_; }
  uint64_t rejected() const { return rejected_; }  // 404, 405, 500

 private:
  // Answers on the first call, before any request body: nothing here accepts a body, and MHD
  // closes the connection after an early reply instead of reading what the client sends.
  platform::HttpReply handle(const platform::HttpRequest& request);

  Render render_;
  uint64_t served_ = 0, rejected_ = 0;
  platform::HttpServer http_;  // last: its handler uses the members above
};

}  // namespace fo::metrics
