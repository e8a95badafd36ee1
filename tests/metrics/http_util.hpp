// Test helpers for the metrics endpoint: turn the loop until a condition holds, and make one
// blocking libcurl request on a helper thread while the loop (and so the server) keeps running.
#pragma once

#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

namespace fo::metrics::test {

// Returns whether `done()` became true before `limit` elapsed.
inline bool run_until(sd_event* e, const std::function<bool()>& done,
                      std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (sd_event_run(e, 20 * 1000) < 0) return false;  // wake at least every 20 ms
  }
  return true;
}

struct HttpReply {
  long status = 0;  // 0: no HTTP reply (see error)
  std::string body;
  std::string headers;  // raw header block
  std::string error;
  bool has_header(const std::string& line) const {
    return headers.find(line + "\r\n") != std::string::npos;
  }
};

inline HttpReply blocking_request(const std::string& url, const std::string& method,
                                  const std::string& body, std::chrono::milliseconds timeout) {
  HttpReply out;
  CURL* c = curl_easy_init();
  if (!c) {
    out.error = "curl_easy_init failed";
    return out;
  }
  char err[CURL_ERROR_SIZE] = {};
  auto append = +[](char* p, size_t size, size_t n, void* s) {
    static_cast<std::string*>(s)->append(p, size * n);
    return size * n;
  };
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, long(timeout.count()));
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &out.body);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, append);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &out.headers);
  if (method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (method != "GET") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, long(body.size()));
  }
  if (CURLcode rc = curl_easy_perform(c); rc != CURLE_OK)
    out.error = err[0] ? err : curl_easy_strerror(rc);
  else
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out.status);
  curl_easy_cleanup(c);
  return out;
}

// Runs the loop while a helper thread makes the request; the curl timeout bounds the wait.
inline HttpReply request(sd_event* e, const std::string& url, const std::string& method = "GET",
                         const std::string& body = "",
                         std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  HttpReply out;
  std::atomic<bool> done{false};
  std::thread t([&] {
    out = blocking_request(url, method, body, timeout);
    done = true;
  });
  run_until(
      e, [&] { return done.load(); }, timeout + std::chrono::seconds(2));
  t.join();
  return out;
}

inline std::string url(uint16_t port, const std::string& path = "/metrics") {
  return "http://127.0.0.1:" + std::to_string(port) + path;
}

// A raw client connection to 127.0.0.1:port (closed on destruction).
class RawClient {
 public:
  explicit RawClient(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawClient() { close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  bool send(const std::string& s) {
    return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == ssize_t(s.size());
  }
  // True once the server has closed the connection (reads EOF or an error without blocking).
  bool closed_by_peer() {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0) return true;
      if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
      received_.append(buf, size_t(n));
    }
  }
  const std::string& received() const { return received_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string received_;
};

}  // namespace fo::metrics::test
