// A real HTTP server for the webhook tests: libmicrohttpd on 127.0.0.1, port 0, one thread per
// connection so a deliberately slow answer does not hold up others. Records every request
// (method, path, headers, body) and answers with the configured status after an optional delay.
#pragma once

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace fo::test {

struct WebhookRequest {
  std::string method;
  std::string path;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

struct WebhookReply {
  unsigned status = 204;
  std::string body;
  std::chrono::milliseconds delay{0};
  bool echo_authorization = false;  // answer with the Authorization header as the body
};

class WebhookServer {
 public:
  WebhookServer() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error("socket failed");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 64) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ::close(fd);
      throw std::runtime_error("bind/listen failed");
    }
    port_ = ntohs(a.sin_port);
    daemon_ = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0, nullptr, nullptr,
        &WebhookServer::handle, this, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_NOTIFY_COMPLETED,
        &WebhookServer::completed, this, MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    if (!daemon_) {
      ::close(fd);
      throw std::runtime_error("MHD_start_daemon failed");
    }
  }

  ~WebhookServer() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    MHD_stop_daemon(daemon_);  // joins the connection threads and closes the listen socket
  }

  WebhookServer(const WebhookServer&) = delete;
  WebhookServer& operator=(const WebhookServer&) = delete;

  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  void reply(WebhookReply r) {
    std::lock_guard lock(mu_);
    reply_ = std::move(r);
  }
  std::vector<WebhookRequest> requests() const {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  static constexpr std::size_t kMaxBody = 1024 * 1024;

  static MHD_Result collect_header(void* cls, MHD_ValueKind, const char* key, const char* value) {
    auto* req = static_cast<WebhookRequest*>(cls);
    std::string name(key);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    req->headers[name] = value ? value : "";
    return MHD_YES;
  }

  static MHD_Result handle(void* cls, MHD_Connection* conn, const char* url, const char* method,
                           const char*, const char* upload, size_t* upload_size, void** state) {
    auto* self = static_cast<WebhookServer*>(cls);
    if (!*state) {
      auto* req = new WebhookRequest;
      req->method = method;
      req->path = url;
      MHD_get_connection_values(conn, MHD_HEADER_KIND, &WebhookServer::collect_header, req);
      *state = req;
      return MHD_YES;
    }
    auto* req = static_cast<WebhookRequest*>(*state);
    if (*upload_size > 0) {
      if (req->body.size() + *upload_size <= kMaxBody) req->body.append(upload, *upload_size);
      *upload_size = 0;
      return MHD_YES;
    }
    WebhookReply r;
    {
      std::unique_lock lock(self->mu_);
      self->seen_.push_back(*req);
      r = self->reply_;
      // Bounded by the delay, and cut short when the server stops.
      self->wake_.wait_for(lock, r.delay, [&] { return self->stopping_; });
    }
    std::string body = r.body;
    if (r.echo_authorization) body = "you sent: " + req->headers["authorization"];
    MHD_Response* resp =
        MHD_create_response_from_buffer(body.size(), body.data(), MHD_RESPMEM_MUST_COPY);
    const MHD_Result rc = MHD_queue_response(conn, r.status, resp);
    MHD_destroy_response(resp);
    return rc;
  }

  static void completed(void*, MHD_Connection*, void** state, MHD_RequestTerminationCode) {
    delete static_cast<WebhookRequest*>(*state);
    *state = nullptr;
  }

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  WebhookReply reply_;
  std::vector<WebhookRequest> seen_;
  std::uint16_t port_ = 0;
  MHD_Daemon* daemon_ = nullptr;
};

}  // namespace fo::test
