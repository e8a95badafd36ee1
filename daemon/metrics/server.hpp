// HTTP endpoint for Prometheus: GET /metrics served by libmicrohttpd in external-epoll mode on
// the daemon's sd-event loop (RECIPES.md §10.4), so the render callback runs on the loop thread
// and reads daemon state without locks.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "daemon/platform/event.hpp"

struct MHD_Daemon;

namespace fo::metrics {

// A literal, so data() is NUL-terminated.
inline constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

struct ListenAddress {
  sockaddr_storage addr{};
  socklen_t len = 0;
};

// "127.0.0.1:9772" or "[::1]:9772": IP literals only (no name resolution), port 0..65535.
std::optional<ListenAddress> parse_listen(std::string_view text);

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
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // The bound port (the kernel's choice when `listen` asked for port 0).
  uint16_t port() const { return port_; }
  // Requests answered so far, by outcome (for the daemon's own logging and the tests).
  uint64_t served() const { return served_; }
  uint64_t rejected() const { return rejected_; }  // 404, 405, 500

 private:
  struct MhdStop {
    void operator()(MHD_Daemon* d) const;
  };

  friend struct ServerGlue;  // the C callbacks, in server.cpp (keeps microhttpd.h private)
  struct Reply {
    unsigned status = 200;
    std::string body;
  };

  Reply handle(std::string_view url, std::string_view method);
  // Runs MHD and re-arms the timer from MHD_get_timeout (0 means run again at once).
  void run();

  Render render_;
  uint16_t port_ = 0;
  uint64_t served_ = 0, rejected_ = 0;
  std::chrono::steady_clock::time_point log_window_start_{};
  int log_lines_ = 0;
  std::unique_ptr<MHD_Daemon, MhdStop> daemon_;
  platform::SourcePtr io_;
  std::unique_ptr<platform::Timer> timer_;
};

}  // namespace fo::metrics
