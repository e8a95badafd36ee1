// Tests of the HTTP(S) probe against a real loopback server, on a real sd-event loop.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <string>

#include "daemon/platform/curl_multi.hpp"
#include "probes/http/http_probe.hpp"
#include "tests/platform/loop_util.hpp"
#include "tests/probes/test_http_server.hpp"

using fo::config::HttpProbe;
using fo::config::Location;
using fo::config::StatusRange;
using fo::probes::HttpProber;
using fo::probes::ProbeResult;
using fo::test::Route;
using fo::test::TestHttpServer;
using Ms = std::chrono::milliseconds;

namespace {

uint16_t closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// One loop, one CurlMulti, one prober; run() starts a check and waits for its single result.
struct Rig {
  fo::platform::EventPtr loop = fo::platform::make_event();
  fo::platform::CurlMulti multi{loop.get()};
  HttpProber prober{multi};
  double took_ms = 0;

  ProbeResult run(const HttpProbe& spec, const Location& from = Location{}) {
    std::optional<ProbeResult> result;
    int calls = 0;
    const auto t0 = std::chrono::steady_clock::now();
    prober.start(spec, from, [&](ProbeResult r) {
      ++calls;
      result = std::move(r);
    });
    REQUIRE(calls == 0);  // never synchronous
    REQUIRE(fo::test::run_until(
        loop.get(), [&] { return calls > 0; }, std::chrono::seconds(10)));
    took_ms = fo::test::ms_since(t0);
    // Exactly once: a few more iterations bring no second call.
    for (int i = 0; i < 3; ++i) sd_event_run(loop.get(), 1000);
    REQUIRE(calls == 1);
    REQUIRE(multi.in_flight() == 0);
    return *result;
  }
};

HttpProbe probe_of(const std::string& url) {
  HttpProbe p;
  p.url = url;
  p.timeout = Ms(5000);
  return p;
}

}  // namespace

TEST_CASE("http probe: 200 is ok with a latency", "[probes][http]") {
  TestHttpServer server;
  server.route("/health", Route{});
  Rig rig;
  auto r = rig.run(probe_of(server.url("/health")));
  CHECK(r.ok);
  CHECK(r.error.empty());
  CHECK(r.http_status == 200);
  CHECK(r.latency_ms > 0);
  CHECK(r.latency_ms < 5000);
  auto seen = server.seen();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].method == "GET");
  CHECK(seen[0].head.find("User-Agent: failoverd/0.1") != std::string::npos);
}

TEST_CASE("http probe: 503 is not ok and says why", "[probes][http]") {
  TestHttpServer server;
  server.route("/health", Route{.status = 503, .body = "down"});
  Rig rig;
  auto r = rig.run(probe_of(server.url("/health")));
  CHECK_FALSE(r.ok);
  CHECK(r.http_status == 503);
  CHECK(r.error == "status 503 not in 200-399");
}

TEST_CASE("http probe: expected status set 200,204", "[probes][http]") {
  TestHttpServer server;
  server.route("/ok", Route{.status = 200});
  server.route("/nocontent", Route{.status = 204, .body = ""});
  server.route("/moved", Route{.status = 301, .body = ""});
  Rig rig;
  auto spec = probe_of(server.url("/ok"));
  spec.expect_status = {StatusRange{200, 200}, StatusRange{204, 204}};
  CHECK(rig.run(spec).ok);
  spec.url = server.url("/nocontent");
  auto r204 = rig.run(spec);
  CHECK(r204.ok);
  CHECK(r204.http_status == 204);
  spec.url = server.url("/moved");
  auto r301 = rig.run(spec);
  CHECK_FALSE(r301.ok);
  CHECK(r301.http_status == 301);  // redirects are judged, not followed
  CHECK(r301.error == "status 301 not in 200,204");
  CHECK(server.requests() == 3);
}

TEST_CASE("http probe: body_contains", "[probes][http]") {
  TestHttpServer server;
  server.route("/health", Route{.body = "status: OK, db: up"});
  Rig rig;
  auto spec = probe_of(server.url("/health"));
  spec.body_contains = "db: up";
  CHECK(rig.run(spec).ok);
  spec.body_contains = "OKAY";
  auto r = rig.run(spec);
  CHECK_FALSE(r.ok);
  CHECK(r.http_status == 200);
  CHECK(r.error == "body does not contain \"OKAY\"");
}

TEST_CASE("http probe: timeout when the server never answers", "[probes][http]") {
  TestHttpServer server;
  server.route("/hang", Route{.never_answer = true});
  Rig rig;
  auto spec = probe_of(server.url("/hang"));
  spec.timeout = Ms(200);
  auto r = rig.run(spec);
  CHECK_FALSE(r.ok);
  CHECK(r.error == "timeout after 200 ms");
  CHECK(rig.took_ms >= 190.0);
  CHECK(rig.took_ms < 1500.0);
  CHECK(r.latency_ms >= 190.0);
}

TEST_CASE("http probe: slow answer within the timeout is ok", "[probes][http]") {
  TestHttpServer server;
  server.route("/slow", Route{.delay = Ms(100)});
  Rig rig;
  auto r = rig.run(probe_of(server.url("/slow")));
  CHECK(r.ok);
  CHECK(r.latency_ms >= 95.0);
}

TEST_CASE("http probe: connection refused", "[probes][http]") {
  Rig rig;
  auto r = rig.run(probe_of("http://127.0.0.1:" + std::to_string(closed_port()) + "/"));
  CHECK_FALSE(r.ok);
  CHECK(r.http_status == 0);
  CHECK(r.error == "connection refused");
  CHECK(rig.took_ms < 2000.0);
}

TEST_CASE("http probe: connection reset", "[probes][http]") {
  TestHttpServer server;
  server.route("/reset", Route{.reset = true});
  Rig rig;
  auto r = rig.run(probe_of(server.url("/reset")));
  CHECK_FALSE(r.ok);
  CHECK(r.http_status == 0);
  CHECK(r.error == "connection reset");
}

TEST_CASE("http probe: response size cap", "[probes][http]") {
  TestHttpServer server;
  server.route("/big", Route{.huge_body = 1 << 20});
  server.route("/big-stream", Route{.huge_body = 1 << 20, .no_content_length = true});
  server.route("/fits", Route{.huge_body = 1000, .no_content_length = true});
  Rig rig;
  auto spec = probe_of(server.url("/big"));
  spec.max_body = 65536;
  auto r = rig.run(spec);  // refused from Content-Length, before the body
  CHECK_FALSE(r.ok);
  CHECK(r.error == "response larger than 65536 bytes");

  spec.url = server.url("/big-stream");  // no length: the write callback stops it
  r = rig.run(spec);
  CHECK_FALSE(r.ok);
  CHECK(r.error == "response larger than 65536 bytes");

  spec.url = server.url("/fits");
  spec.body_contains = "xxxx";
  CHECK(rig.run(spec).ok);
}

TEST_CASE("http probe: HEAD sends no body request and is ok", "[probes][http]") {
  TestHttpServer server;
  server.route("/health", Route{.body = "a body HEAD must not read"});
  Rig rig;
  auto spec = probe_of(server.url("/health"));
  spec.method = "HEAD";
  auto r = rig.run(spec);
  CHECK(r.ok);
  CHECK(r.http_status == 200);
  auto seen = server.seen();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].method == "HEAD");
}

TEST_CASE("http probe: custom headers are sent, bad ones refused", "[probes][http]") {
  TestHttpServer server;
  server.route("/health", Route{});
  Rig rig;
  auto spec = probe_of(server.url("/health"));
  spec.headers = {{"Host", "www.example.test"}, {"X-Probe", "failoverd"}};
  CHECK(rig.run(spec).ok);
  auto seen = server.seen();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].head.find("Host: www.example.test") != std::string::npos);
  CHECK(seen[0].head.find("X-Probe: failoverd") != std::string::npos);

  spec.headers = {{"X-Evil", "a\r\nInjected: yes"}};
  auto r = rig.run(spec);
  CHECK_FALSE(r.ok);
  CHECK(r.error == "invalid value for header X-Evil");
  spec.headers.clear();
  spec.method = "POST";
  r = rig.run(spec);
  CHECK_FALSE(r.ok);
  CHECK(r.error == "unsupported method POST");
  CHECK(server.requests() == 1);
}

TEST_CASE("http probe: https against a plain-http port fails cleanly", "[probes][http]") {
  TestHttpServer server;
  server.route("/health", Route{});
  Rig rig;
  auto spec = probe_of("https://127.0.0.1:" + std::to_string(server.port()) + "/health");
  spec.timeout = Ms(2000);
  auto r = rig.run(spec);
  CHECK_FALSE(r.ok);
  CHECK(r.http_status == 0);
  CHECK_THAT(r.error, Catch::Matchers::StartsWith("TLS: "));
  CHECK(rig.took_ms < 1500.0);
}

TEST_CASE("http probe: only http and https", "[probes][http]") {
  Rig rig;
  auto r = rig.run(probe_of("file:///etc/hostname"));
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.error, Catch::Matchers::Contains("file"));
}

TEST_CASE("http probe: source address of the location", "[probes][http]") {
  TestHttpServer server;
  server.route("/health", Route{});
  Rig rig;
  Location loc;
  loc.name = "lo";
  loc.source_address = "127.0.0.1";
  auto ok = rig.run(probe_of(server.url("/health")), loc);
  CHECK(ok.ok);

  // 192.0.2.1 (TEST-NET-1) is not an address of this host: bind() fails, nothing is sent.
  loc.source_address = "192.0.2.1";
  auto bad = rig.run(probe_of(server.url("/health")), loc);
  CHECK_FALSE(bad.ok);
  CHECK_THAT(bad.error, Catch::Matchers::StartsWith("cannot bind source: "));
  CHECK(server.requests() == 1);
}

TEST_CASE("http probe: interface strings for curl", "[probes][http]") {
  Location loc;
  CHECK(fo::probes::curl_interface_for(loc).empty());
  loc.interface = "eth1";
  CHECK(fo::probes::curl_interface_for(loc) == "if!eth1");
  loc.interface.clear();
  loc.source_address = "10.0.0.5";
  CHECK(fo::probes::curl_interface_for(loc) == "host!10.0.0.5");
}

TEST_CASE("http probe: status helpers", "[probes][http]") {
  std::vector<StatusRange> set{{200, 299}, {304, 304}};
  CHECK(fo::probes::status_expected(204, set));
  CHECK(fo::probes::status_expected(304, set));
  CHECK_FALSE(fo::probes::status_expected(301, set));
  CHECK(fo::probes::describe_statuses(set) == "200-299,304");
}

TEST_CASE("http probe: many checks share one loop", "[probes][http]") {
  TestHttpServer server;
  server.route("/a", Route{});
  server.route("/b", Route{.status = 500});
  server.route("/c", Route{.never_answer = true});
  Rig rig;
  int ok = 0, failed = 0, timeouts = 0;
  auto count = [&](ProbeResult r) {
    if (r.ok)
      ++ok;
    else if (r.error.rfind("timeout", 0) == 0)
      ++timeouts;
    else
      ++failed;
  };
  for (int i = 0; i < 20; ++i) {
    rig.prober.start(probe_of(server.url("/a")), Location{}, count);
    rig.prober.start(probe_of(server.url("/b")), Location{}, count);
    auto slow = probe_of(server.url("/c"));
    slow.timeout = Ms(300);
    rig.prober.start(slow, Location{}, count);
  }
  REQUIRE(fo::test::run_until(rig.loop.get(), [&] { return ok + failed + timeouts == 60; }));
  CHECK(ok == 20);
  CHECK(failed == 20);
  CHECK(timeouts == 20);
}
