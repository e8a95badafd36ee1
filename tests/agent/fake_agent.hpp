// A stand-in for a misbehaving probe agent: a real HTTP/1.1 listener on 127.0.0.1 (port 0) with
// one thread per connection. It reads the whole request (head and Content-Length body), then
// answers as told: a given status/body, a huge body, late, or never. Requests are recorded.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace fo::test {

struct FakeReply {
  int status = 200;
  std::string body;
  std::string extra_headers;  // "Retry-After: 7\r\n"
  std::chrono::milliseconds delay{0};
  bool never_answer = false;
  std::size_t huge = 0;  // > 0: a body of this many bytes of '[' instead of `body`
};

inline FakeReply make_reply(int status, std::string body, std::string extra_headers = "") {
  FakeReply r;
  r.status = status;
  r.body = std::move(body);
  r.extra_headers = std::move(extra_headers);
  return r;
}

struct FakeRequest {
  std::string head;
  std::string body;
};

class FakeAgent {
 public:
  // `reply` builds the answer from the request (e.g. echo the round back).
  explicit FakeAgent(std::function<FakeReply(const FakeRequest&)> reply)
      : reply_(std::move(reply)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(fd_, 64) != 0)
      throw std::runtime_error("fake agent: cannot listen");
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe");
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~FakeAgent() {
    stop_ = true;
    [[maybe_unused]] auto n = ::write(wake_[1], "x", 1);
    acceptor_.join();
    for (auto& t : workers_) t.join();
    ::close(fd_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }
  FakeAgent(const FakeAgent&) = delete;
  FakeAgent& operator=(const FakeAgent&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::size_t connections() const { return connections_; }
  std::vector<FakeRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  // Waits for `fd` (or the stop pipe) up to `ms`; false when stopping or timed out.
  bool wait(int fd, short events, int ms) {
    pollfd p[2] = {{fd, events, 0}, {wake_[0], POLLIN, 0}};
    return ::poll(p, 2, ms) > 0 && !stop_ && (p[0].revents & (events | POLLHUP | POLLERR));
  }

  void accept_loop() {
    while (!stop_) {
      if (!wait(fd_, POLLIN, 1000)) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      ++connections_;
      std::lock_guard lock(workers_mu_);
      workers_.emplace_back([this, c] {
        serve(c);
        ::close(c);
      });
    }
  }

  void serve(int c) {
    FakeRequest req;
    std::string in;
    char buf[65536];
    std::size_t want = std::string::npos;
    while (!stop_) {
      if (!wait(c, POLLIN, 5000)) return;
      const ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) return;
      in.append(buf, std::size_t(n));
      const auto end = in.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      if (want == std::string::npos) {
        req.head = in.substr(0, end);
        std::size_t length = 0;
        const auto at = req.head.find("Content-Length: ");
        if (at != std::string::npos) length = std::stoul(req.head.substr(at + 16));
        want = end + 4 + length;
      }
      if (in.size() >= want) {
        req.body = in.substr(end + 4);
        break;
      }
    }
    {
      std::lock_guard lock(mu_);
      requests_.push_back(req);
    }
    const FakeReply r = reply_(req);
    if (r.never_answer) {  // until the client gives up (EOF) or the test ends
      char b[256];
      while (!stop_)
        if (wait(c, POLLIN, 1000) && ::recv(c, b, sizeof b, 0) <= 0) return;
      return;
    }
    if (r.delay.count() > 0) {
      pollfd p{wake_[0], POLLIN, 0};
      ::poll(&p, 1, int(r.delay.count()));
    }
    const std::string body = r.huge ? std::string(r.huge, '[') : r.body;
    std::string out = "HTTP/1.1 " + std::to_string(r.status) +
                      " X\r\nContent-Type: " + "application/json\r\nConnection: close\r\n" +
                      r.extra_headers + "Content-Length: " + std::to_string(body.size()) +
                      "\r\n\r\n" + body;
    std::size_t sent = 0;
    while (sent < out.size() && !stop_) {
      if (!wait(c, POLLOUT, 5000)) return;
      const ssize_t n = ::send(c, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += std::size_t(n);
    }
  }

  std::function<FakeReply(const FakeRequest&)> reply_;
  int fd_ = -1;
  int wake_[2] = {-1, -1};
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> connections_{0};
  mutable std::mutex mu_;
  std::vector<FakeRequest> requests_;
  std::mutex workers_mu_;
  std::vector<std::thread> workers_;
  std::thread acceptor_;
};

}  // namespace fo::test
