// A small HTTP(S) server on the sd-event loop: libmicrohttpd in external-epoll mode on a listening
// socket we open ourselves (exact bind errors, port 0), driven by one io source and one timer, so
// handlers run on the loop thread and read daemon state without locks (RECIPES.md §10.4). Used
// by the metrics endpoint and the probe agent; limits on connections, body size and idle time.
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
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "daemon/platform/event.hpp"

struct MHD_Daemon;
struct MHD_Connection;

namespace fo::platform {

struct ListenAddress {
  sockaddr_storage addr{};
  socklen_t len = 0;
};

// "127.0.0.1:9772" or "[::1]:9772": IP literals only (no name resolution), port 0..65535.
std::optional<ListenAddress> parse_listen(std::string_view text);

struct HttpReply {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;                                          // not sent for HEAD
  std::vector<std::pair<std::string, std::string>> headers;  // extra, e.g. {"Retry-After", "1"}
};

// What a handler does with a request besides answering it at once.
enum class HttpNext {
  read_body,     // read the body (at most max_body_bytes), then call the handler again with it
  answer_later,  // park the connection until HttpServer::answer(request.id, ...)
};
using HttpAnswer = std::variant<HttpReply, HttpNext>;

// One request as the handler sees it. Valid only during the handler call.
class HttpRequest {
 public:
  uint64_t id = 0;  // unique per server, for answer()
  std::string_view method;
  std::string_view path;  // without the query string
  // false: the first call, headers only (a reply now means the body is never read);
  // true: the second call after HttpNext::read_body, with the whole body.
  bool body_read = false;
  std::string_view body;

  // A request header (names are case-insensitive), or nullopt.
  std::optional<std::string_view> header(const char* name) const;
  // The Content-Length header; nullopt without one, UINT64_MAX when it does not parse.
  std::optional<uint64_t> content_length() const;

 private:
  friend struct HttpGlue;
  MHD_Connection* connection_ = nullptr;
};

struct HttpServerOptions {
  unsigned max_connections = 16;
  // Idle or unfinished connections are closed after this (MHD counts whole seconds, 1..3600).
  std::chrono::seconds connection_timeout{10};
  // A larger body (by Content-Length, or counted as it arrives when chunked) is answered with
  // `too_large` (status forced to 413) without calling the handler again.
  std::size_t max_body_bytes = 64 * 1024;
  HttpReply too_large{413, "text/plain; charset=utf-8", "request body too large\n", {}};
  std::string tls_cert_pem;  // both set: HTTPS
  std::string tls_key_pem;
  // libmicrohttpd's own messages (mostly caused by clients) are logged as "<prefix>: <text>",
  // at most this many a minute.
  std::string log_prefix = "http";
  int max_log_lines_per_minute = 10;
};

class HttpServer {
 public:
  // Called on the loop thread, once with the headers and, after HttpNext::read_body, once more
  // with the body. It must not destroy the server. An exception becomes a plain 500 reply (the
  // text goes to the log, not to the client); so does read_body on the second call.
  using Handler = std::function<HttpAnswer(const HttpRequest&)>;

  // Binds and listens at once. Throws std::invalid_argument for a malformed `listen` and
  // std::runtime_error for start-up problems, e.g.
  // "cannot listen on 127.0.0.1:9772: Address already in use".
  HttpServer(sd_event* event, const std::string& listen, Handler handler,
             HttpServerOptions options = HttpServerOptions());
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Sends the reply of a request the handler parked with HttpNext::answer_later (may also be
  // called from inside that handler call). False if `id` is not waiting for an answer.
  bool answer(uint64_t id, HttpReply reply);

  // The bound port (the kernel's choice when `listen` asked for port 0).
  uint16_t port() const { return port_; }
  uint64_t too_large() const { return too_large_; }              // 413s sent by the server itself
  uint64_t errors() const { return errors_; }                    // 500s for handler exceptions
  unsigned waiting() const { return unsigned(parked_.size()); }  // answer_later, not answered

 private:
  struct MhdStop {
    void operator()(MHD_Daemon* d) const;
  };
  friend struct HttpGlue;  // the C callbacks, in http_server.cpp (keeps microhttpd.h private)
  struct Connection;

  HttpAnswer call_handler(const HttpRequest& request, Connection& conn);
  void log_limited(bool error, std::string_view text);
  // Runs MHD and re-arms the timer from MHD_get_timeout (0 means run again at once).
  void run();

  Handler handler_;
  HttpServerOptions options_;
  uint16_t port_ = 0;
  uint64_t next_id_ = 1;
  uint64_t too_large_ = 0, errors_ = 0;
  std::chrono::steady_clock::time_point log_window_start_{};
  int log_lines_ = 0;
  std::unordered_map<uint64_t, Connection*> parked_;
  Connection* current_ = nullptr;  // the request whose handler call is running
  std::unique_ptr<MHD_Daemon, MhdStop> daemon_;
  SourcePtr io_;
  std::unique_ptr<Timer> timer_;
};

}  // namespace fo::platform
