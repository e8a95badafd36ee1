// Tests of the http probe on CurlMulti's pooled easy handles (nothing of one check reaches the
// next) and of its abortive close option, on a real loop against loopback servers.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "daemon/platform/curl_multi.hpp"
#include "probes/http/http_probe.hpp"
#include "tests/platform/loop_util.hpp"
#include "tests/probes/test_http_server.hpp"

using fo::config::HttpProbe;
using fo::config::Location;
using fo::probes::HttpProber;
using fo::probes::ProbeResult;
using fo::test::Route;
using fo::test::TestHttpServer;

namespace {

struct Rig {
  fo::platform::EventPtr loop = fo::platform::make_event();
  fo::platform::CurlMulti multi{loop.get()};
  HttpProber prober{multi};

  ProbeResult run(const HttpProbe& spec) {
    std::optional<ProbeResult> result;
    prober.start(spec, Location{}, [&](ProbeResult r) { result = std::move(r); });
    REQUIRE(fo::test::run_until(
        loop.get(), [&] { return result.has_value(); }, std::chrono::seconds(10)));
    return *result;
  }
};

HttpProbe probe_of(const std::string& url) {
  HttpProbe p;
  p.url = url;
  p.timeout = std::chrono::milliseconds(5000);
  return p;
}

// Answers one request and keeps the connection open, then reports how the client closed it:
// "fin" (orderly), "rst" (reset) or what went wrong. All waits are bounded.
class OneShotServer {
 public:
  OneShotServer() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(listen_fd_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(listen_fd_, 4) == 0);
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      outcome_ = serve();
      done_ = true;
    });
  }
  ~OneShotServer() {
    thread_.join();  // serve() gives up after its own bounded waits
    ::close(listen_fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/"; }
  bool done() const { return done_; }
  const std::string& outcome() const { return outcome_; }  // only once done()

 private:
  static bool wait_readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 5000) == 1;
  }
  std::string serve() {
    if (!wait_readable(listen_fd_)) return "no connection";
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return "accept failed";
    std::string in;
    char buf[4096];
    while (in.find("\r\n\r\n") == std::string::npos) {
      if (!wait_readable(fd)) return ::close(fd), "no request";
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return ::close(fd), "request cut";
      in.append(buf, static_cast<std::size_t>(n));
    }
    const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    if (::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(answer.size()))
      return ::close(fd), "send failed";
    std::string how = "no close";
    if (wait_readable(fd)) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      how = n == 0 ? "fin" : (n < 0 && errno == ECONNRESET) ? "rst" : "unexpected";
    }
    ::close(fd);
    return how;
  }

  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::string outcome_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace

TEST_CASE("http probe: nothing of a check reaches the next one on the same pooled handle",
          "[probes][http][platform]") {
  TestHttpServer server;
  server.route("/reset", Route{.reset = true});
  server.route("/ok", Route{});
  Rig rig;

  HttpProbe first = probe_of(server.url("/reset"));
  first.method = "HEAD";
  first.headers = {{"X-First", "1"}};
  first.resolve = "127.0.0.1";
  first.body_contains = "never";
  auto r1 = rig.run(first);
  CHECK_FALSE(r1.ok);
  CHECK(rig.multi.pooled_handles() == 1);

  auto r2 = rig.run(probe_of(server.url("/ok")));
  CHECK(r2.ok);
  CHECK(r2.http_status == 200);
  CHECK(rig.multi.pooled_handles() == 1);  // the same handle went out and came back

  const auto seen = server.seen();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].method == "HEAD");
  CHECK(seen[0].head.find("X-First: 1") != std::string::npos);
  CHECK(seen[1].method == "GET");
  CHECK(seen[1].head.find("X-First") == std::string::npos);
  CHECK(seen[1].head.find("User-Agent: failoverd/") != std::string::npos);
}

TEST_CASE("http probe: connections end with a FIN, or an RST with abortive_close",
          "[probes][http][platform]") {
  const bool abortive = GENERATE(false, true);
  OneShotServer server;
  Rig rig;
  HttpProbe spec = probe_of(server.url());
  spec.abortive_close = abortive;
  auto r = rig.run(spec);
  CHECK(r.ok);
  REQUIRE(fo::test::run_until(
      rig.loop.get(), [&] { return server.done(); }, std::chrono::seconds(10)));
  CHECK(server.outcome() == (abortive ? "rst" : "fin"));
}
