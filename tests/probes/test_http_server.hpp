// Tiny HTTP/1.1 server for tests: a real socket on 127.0.0.1, port 0, served by one std::thread
// with poll(), so slow or silent answers do not hold up other connections. Behaviour is set per
// path. Every response closes the connection.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace fo::test {

struct Route {
  int status = 200;
  std::string body = "OK";
  std::chrono::milliseconds delay{0};  // wait this long before answering
  bool never_answer = false;           // read the request, then stay silent until the peer goes
  bool reset = false;                  // read the request, then RST the connection
  std::size_t huge_body = 0;           // if > 0: a body of this many bytes instead of `body`
  bool no_content_length = false;      // body delimited by connection close
};

struct SeenRequest {
  std::string method;
  std::string path;
  std::string head;  // request line and headers as received
};

class TestHttpServer {
 public:
  TestHttpServer() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) throw std::runtime_error("socket failed");
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_fd_, 1024) != 0)
      throw std::runtime_error("bind/listen failed");
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    if (::pipe2(wake_, O_NONBLOCK | O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    thread_ = std::thread([this] { serve(); });
  }

  ~TestHttpServer() {
    stop_ = true;
    char c = 'x';
    [[maybe_unused]] auto n = ::write(wake_[1], &c, 1);
    thread_.join();
    for (auto& conn : conns_) ::close(conn.fd);
    ::close(listen_fd_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }

  TestHttpServer(const TestHttpServer&) = delete;
  TestHttpServer& operator=(const TestHttpServer&) = delete;

  uint16_t port() const { return port_; }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

  void route(const std::string& path, Route r) {
    std::lock_guard lock(mu_);
    routes_[path] = std::move(r);
  }

  // Requests whose head was complete (before the server decided how to answer).
  std::size_t requests() const {
    std::lock_guard lock(mu_);
    return seen_.size();
  }
  std::vector<SeenRequest> seen() const {
    std::lock_guard lock(mu_);
    return seen_;
  }
  std::size_t open_connections() const { return open_.load(); }

 private:
  enum class Phase { reading, waiting, writing, holding };
  struct Conn {
    int fd = -1;
    Phase phase = Phase::reading;
    std::string in;
    std::string out;
    std::size_t sent = 0;
    std::chrono::steady_clock::time_point answer_at;
    bool reset = false;
    bool done = false;
  };

  static constexpr std::size_t kMaxHead = 16 * 1024;

  static std::string reason(int status) {
    switch (status) {
      case 200:
        return "OK";
      case 204:
        return "No Content";
      case 301:
        return "Moved Permanently";
      case 400:
        return "Bad Request";
      case 404:
        return "Not Found";
      case 503:
        return "Service Unavailable";
      default:
        return "Status";
    }
  }

  static std::string response(const Route& r, bool head_request) {
    std::string body = r.huge_body > 0 ? std::string(r.huge_body, 'x') : r.body;
    std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + reason(r.status) + "\r\n";
    if (!r.no_content_length) out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    out += "Connection: close\r\n\r\n";
    if (!head_request) out += body;
    return out;
  }

  void decide(Conn& c) {
    // TLS and other non-HTTP bytes get a 400 at once, like a real plain-HTTP server.
    if (!c.in.empty() && !std::isupper(static_cast<unsigned char>(c.in[0]))) {
      c.out = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      c.phase = Phase::writing;
      return;
    }
    const auto end = c.in.find("\r\n\r\n");
    if (end == std::string::npos) {
      if (c.in.size() > kMaxHead) c.done = true;
      return;
    }
    SeenRequest req;
    req.head = c.in.substr(0, end);
    const auto sp1 = req.head.find(' ');
    const auto sp2 = req.head.find(' ', sp1 + 1);
    req.method = req.head.substr(0, sp1);
    req.path = sp1 == std::string::npos ? "" : req.head.substr(sp1 + 1, sp2 - sp1 - 1);
    Route r;
    {
      std::lock_guard lock(mu_);
      seen_.push_back(req);
      auto it = routes_.find(req.path);
      if (it != routes_.end()) {
        r = it->second;
      } else {
        r.status = 404;
        r.body = "not found";
      }
    }
    if (r.never_answer) {
      c.phase = Phase::holding;
    } else if (r.reset) {
      c.reset = true;
      c.done = true;
    } else {
      c.out = response(r, req.method == "HEAD");
      c.answer_at = std::chrono::steady_clock::now() + r.delay;
      c.phase = Phase::waiting;
    }
  }

  void on_readable(Conn& c) {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
      if (n > 0) {
        if (c.phase == Phase::reading) c.in.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (n == 0)
        c.done = true;  // peer closed: nobody is waiting for an answer any more
      else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        c.done = true;
      break;
    }
    if (!c.done && c.phase == Phase::reading) decide(c);
  }

  void on_writable(Conn& c) {
    while (c.sent < c.out.size()) {
      const ssize_t n = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n > 0) {
        c.sent += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
      c.done = true;
      return;
    }
    c.done = true;
  }

  void close_conn(Conn& c) {
    if (c.reset) {
      linger l{1, 0};  // close() then sends RST instead of FIN
      ::setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    ::close(c.fd);
    c.fd = -1;
    --open_;
  }

  void accept_all() {
    for (;;) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      Conn c;
      c.fd = fd;
      conns_.push_back(std::move(c));
      ++open_;
    }
  }

  void serve() {
    while (!stop_) {
      const auto now = std::chrono::steady_clock::now();
      int timeout_ms = 1000;
      for (auto& c : conns_) {
        if (c.phase == Phase::waiting) {
          if (c.answer_at <= now) {
            c.phase = Phase::writing;
          } else {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(c.answer_at - now);
            timeout_ms = std::min<int>(timeout_ms, static_cast<int>(left.count()) + 1);
          }
        }
      }
      std::vector<pollfd> fds;
      fds.push_back({wake_[0], POLLIN, 0});
      fds.push_back({listen_fd_, POLLIN, 0});
      for (auto& c : conns_) {
        short ev = POLLIN;
        if (c.phase == Phase::writing) ev |= POLLOUT;
        fds.push_back({c.fd, ev, 0});
      }
      if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) return;
      if (fds[1].revents & POLLIN) accept_all();
      for (std::size_t i = 0; i + 2 < fds.size() && i < conns_.size(); ++i) {
        Conn& c = conns_[i];
        const short rev = fds[i + 2].revents;
        if (rev & (POLLIN | POLLHUP | POLLERR)) on_readable(c);
        if (!c.done && c.phase == Phase::writing && (rev & POLLOUT)) on_writable(c);
        if (!c.done && c.phase == Phase::writing && c.sent == 0) on_writable(c);
      }
      for (auto& c : conns_)
        if (c.done) close_conn(c);
      conns_.erase(
          std::remove_if(conns_.begin(), conns_.end(), [](const Conn& c) { return c.fd < 0; }),
          conns_.end());
    }
  }

  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> open_{0};
  mutable std::mutex mu_;
  std::map<std::string, Route> routes_;
  std::vector<SeenRequest> seen_;
  std::vector<Conn> conns_;  // server thread only
  std::thread thread_;
};

}  // namespace fo::test
