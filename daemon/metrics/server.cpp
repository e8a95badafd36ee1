// MetricsServer: routing and the render call; the HTTP side is platform::HttpServer.
#include "daemon/metrics/server.hpp"

#include <spdlog/spdlog.h>

#include <stdexcept>
#include <utility>

namespace fo::metrics {
namespace {

const std::string& checked_listen(const std::string& listen) {
  if (!parse_listen(listen))
    throw std::invalid_argument("metrics: invalid listen address '" + listen +
                                "' (expected ADDR:PORT, e.g. 127.0.0.1:9772 or [::1]:9772)");
  return listen;
}

platform::HttpServerOptions http_options(const ServerLimits& limits) {
  platform::HttpServerOptions o;
  o.max_connections = limits.max_connections;
  o.connection_timeout = limits.connection_timeout;
  // MHD messages are mostly caused by clients; bound what they can make us log.
  o.log_prefix = "metrics endpoint";
  o.max_log_lines_per_minute = 10;
  return o;
}

platform::HttpReply error_reply(unsigned status, std::string body) {
  platform::HttpReply r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

}  // namespace

MetricsServer::MetricsServer(sd_event* event, const std::string& listen, Render render,
                             ServerLimits limits)
    : render_(std::move(render)),
      http_(
          event, checked_listen(listen),
          [this](const platform::HttpRequest& request) -> platform::HttpAnswer {
            return handle(request);
          },
          http_options(limits)) {}

platform::HttpReply MetricsServer::handle(const platform::HttpRequest& request) {
  if (request.path != "/metrics") {
    ++rejected_;
    return error_reply(404, "not found; metrics are at /metrics\n");
  }
  if (request.method != "GET" && request.method != "HEAD") {
    ++rejected_;
    auto r = error_reply(405, "method not allowed; use GET\n");
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  try {
    platform::HttpReply r;
    r.content_type = std::string(kContentType);
    r.body = render_();
    ++served_;
    return r;
  } catch (const std::exception& e) {
    spdlog::error("metrics endpoint: rendering failed: {}", e.what());
  } catch (...) {
    spdlog::error("metrics endpoint: rendering failed");
  }
  ++rejected_;
  return error_reply(500, "rendering the metrics failed\n");
}

}  // namespace fo::metrics
