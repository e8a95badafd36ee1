// Test helpers for the agent tests: an sd-event loop with the probe plumbing, a loopback
// listener for TCP probes, an HTTP client on the same loop (so an in-process AgentServer and its
// clients share one thread), and config snippets.
#pragma once

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "actions/exec/exec_runner.hpp"
#include "daemon/config/config.hpp"
#include "daemon/platform/curl_multi.hpp"
#include "probes/dispatcher.hpp"
#include "tests/platform/loop_util.hpp"

namespace fo::test {

struct Rig {
  platform::EventPtr loop = platform::make_event();
  platform::CurlMulti curl{loop.get()};
  actions::ExecRunner exec{loop.get()};
  probes::ProbeDispatcher dispatcher{loop.get(), curl, exec};
};

// A TCP listener on 127.0.0.1 that never accepts: connects succeed (backlog), nothing is sent.
class Listener {
 public:
  Listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd_, 128) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd_); }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

struct HttpReply {
  long status = 0;
  std::string body;
  long retry_after = 0;
  CURLcode rc = CURLE_OK;
};

inline std::size_t collect(char* d, std::size_t s, std::size_t n, void* p) {
  static_cast<std::string*>(p)->append(d, s * n);
  return s * n;
}

// Starts one request on the rig's CurlMulti; the result lands in *out when done.
inline void start_http(Rig& rig, const std::string& url, const std::string& method,
                       const std::string& body, const std::vector<std::string>& headers,
                       std::optional<HttpReply>& out) {
  struct Buf {
    std::string body;
    std::string payload;
    curl_slist* headers = nullptr;
    ~Buf() { curl_slist_free_all(headers); }
  };
  auto buf = std::make_shared<Buf>();
  buf->payload = body;
  CURL* e = curl_easy_init();
  for (const auto& h : headers) buf->headers = curl_slist_append(buf->headers, h.c_str());
  buf->headers = curl_slist_append(buf->headers, "Expect:");
  curl_easy_setopt(e, CURLOPT_URL, url.c_str());
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, buf->headers);
  if (method == "POST") {
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, buf->payload.data());
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(buf->payload.size()));
  } else if (method != "GET") {
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &collect);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &buf->body);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 10000L);
  curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
  rig.curl.add(e, [buf, &out](CURLcode rc, CURL* h) {
    HttpReply r;
    r.rc = rc;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.status);
    curl_off_t ra = 0;
    curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &ra);
    r.retry_after = long(ra);
    r.body = std::move(buf->body);
    out = std::move(r);
  });
}

inline HttpReply http(Rig& rig, const std::string& url, const std::string& method,
                      const std::string& body = "", const std::vector<std::string>& headers = {}) {
  std::optional<HttpReply> out;
  start_http(rig, url, method, body, headers, out);
  REQUIRE(run_until(
      rig.loop.get(), [&] { return out.has_value(); }, std::chrono::seconds(15)));
  return *out;
}

}  // namespace fo::test
