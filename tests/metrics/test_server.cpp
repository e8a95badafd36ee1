// MetricsServer on a real sd-event loop, loopback and port 0: GET /metrics through libcurl,
// 404/405/500, HEAD, slow and idle clients, the connection limit, bind errors, IPv6, and
// `promtool check metrics` on a fully populated scrape.
#include <stdlib.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include "daemon/metrics/daemon_metrics.hpp"
#include "daemon/metrics/server.hpp"
#include "daemon/platform/event.hpp"
#include "http_util.hpp"

using namespace fo;
using namespace fo::metrics;
using namespace fo::metrics::test;
using namespace std::chrono_literals;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/fo-metrics-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

struct PromtoolResult {
  int exit_code = -1;
  std::string output;
};

// Runs `promtool check metrics` on `text`. The test fails (not skips) without promtool.
PromtoolResult promtool_check(const std::string& text) {
  TempDir dir;
  const std::string in = dir.path + "/scrape.txt", out = dir.path + "/promtool.out";
  std::ofstream(in, std::ios::binary) << text;
  const std::string cmd = "promtool check metrics < " + in + " > " + out + " 2>&1";
  const int status = std::system(cmd.c_str());
  PromtoolResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.output = read_file(out);
  return r;
}

// Every family of the daemon with realistic label values.
void populate(DaemonMetrics& m) {
  for (const char* group : {"shop", "blog"}) {
    m.set_group_state(group, core::State::primary_degraded);
    m.set_active(group, core::Site::primary);
    for (core::Site site : {core::Site::primary, core::Site::secondary}) {
      core::SiteHealth h;
      h.configured = 3;
      h.reporting = site == core::Site::primary ? 3 : 1;
      h.healthy = site == core::Site::primary ? 2 : 1;
      h.known = site == core::Site::primary;
      h.locations = {{"ams", core::Verdict::healthy, {}},
                     {"fra", core::Verdict::unhealthy, {}},
                     {"nyc", core::Verdict::missing, {}}};
      m.set_site_health(group, site, h);
      for (const char* loc : {"ams", "fra"}) {
        m.observe_probe(group, site, loc, "front", true, 0.0042);
        m.observe_probe(group, site, loc, "front", false, 5.0);
        m.observe_probe(group, site, loc, "api \"v2\"", true, 0.12);
      }
    }
    m.count_round(group);
    m.count_transition(group, core::State::primary_active, core::State::primary_degraded,
                       core::Initiator::automatic);
    m.observe_step(group, core::Phase::warm, "start-db", "ok", 3.2);
    m.observe_step(group, core::Phase::warm, "dns", "timeout", 60);
    m.count_plan(group, core::Phase::warm, true);
    m.count_reconcile_drift(group, "dns_record");
  }
  m.set_store(3, 1234, 1, 0);
}

struct Loop {
  platform::EventPtr event = platform::make_event();
  sd_event* get() const { return event.get(); }
};

}  // namespace

TEST_CASE("GET /metrics answers with the rendered text", "[metrics][server]") {
  Loop loop;
  int renders = 0;
  MetricsServer server(loop.get(), "127.0.0.1:0", [&] {
    ++renders;
    return "# HELP x_total X.\n# TYPE x_total counter\nx_total " + std::to_string(renders) + "\n";
  });
  REQUIRE(server.port() != 0);

  auto r = request(loop.get(), url(server.port()));
  INFO(r.error);
  CHECK(r.status == 200);
  CHECK(r.body == "# HELP x_total X.\n# TYPE x_total counter\nx_total 1\n");
  CHECK(r.has_header("Content-Type: text/plain; version=0.0.4; charset=utf-8"));

  // Rendered afresh for every scrape; a query string does not change the path.
  r = request(loop.get(), url(server.port(), "/metrics?name[]=x"));
  CHECK(r.status == 200);
  CHECK(r.body.find("x_total 2\n") != std::string::npos);

  r = request(loop.get(), url(server.port()), "HEAD");
  CHECK(r.status == 200);
  CHECK(r.body.empty());
  CHECK(server.served() == 3);
  CHECK(server.rejected() == 0);
}

TEST_CASE("an idle server leaves the loop asleep", "[metrics][server]") {
  Loop loop;
  MetricsServer server(loop.get(), "127.0.0.1:0", [] { return "up 1\n"; });
  CHECK(request(loop.get(), url(server.port())).status == 200);
  // Once the client's close is processed, nothing (no io, no MHD timer) may wake the loop.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (sd_event_run(loop.get(), 200 * 1000) > 0 && std::chrono::steady_clock::now() < deadline) {
  }
  int woken = 0;
  for (int i = 0; i < 3; ++i) woken += sd_event_run(loop.get(), 100 * 1000) > 0;
  CHECK(woken == 0);
}

TEST_CASE("other paths get 404, other methods 405, render errors 500", "[metrics][server]") {
  Loop loop;
  bool fail = false;
  MetricsServer server(loop.get(), "127.0.0.1:0", [&]() -> std::string {
    if (fail) throw std::runtime_error("boom");
    return "ok_total 1\n";
  });
  for (const char* path : {"/", "/metrics/", "/metricsx", "/favicon.ico"}) {
    CAPTURE(path);
    auto r = request(loop.get(), url(server.port(), path));
    INFO(r.error);
    CHECK(r.status == 404);
  }
  // A large body is not read: the reply comes first and the connection is closed.
  for (const char* method : {"POST", "PUT", "DELETE"}) {
    CAPTURE(method);
    auto r = request(loop.get(), url(server.port()), method, std::string(200000, 'x'));
    INFO(r.error);
    CHECK(r.status == 405);
    CHECK(r.has_header("Allow: GET, HEAD"));
  }
  fail = true;
  auto r = request(loop.get(), url(server.port()));
  CHECK(r.status == 500);
  CHECK(r.body.find("boom") == std::string::npos);  // details go to the log, not the client
  CHECK(server.rejected() == 8);
  CHECK(server.served() == 0);
}

TEST_CASE("a slow client does not block other requests and is timed out", "[metrics][server]") {
  Loop loop;
  ServerLimits limits;
  limits.connection_timeout = 1s;
  MetricsServer server(
      loop.get(), "127.0.0.1:0", [] { return "up 1\n"; }, limits);

  RawClient slow(server.port());
  REQUIRE(slow.connected());
  REQUIRE(slow.send("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"));  // headers never end
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) {
    auto r = request(loop.get(), url(server.port()));
    INFO(r.error);
    CHECK(r.status == 200);
    CHECK(r.body == "up 1\n");
  }
  // MHD's own deadline runs through our timer: the half-sent request is closed after ~1 s.
  CHECK(run_until(
      loop.get(), [&] { return slow.closed_by_peer(); }, 5s));
  const auto waited = std::chrono::steady_clock::now() - t0;
  CHECK(waited >= 900ms);
  CHECK(slow.received().empty());

  // An idle keep-alive client is closed the same way.
  RawClient idle(server.port());
  REQUIRE(idle.connected());
  REQUIRE(idle.send("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  CHECK(run_until(
      loop.get(), [&] { return idle.closed_by_peer(); }, 5s));
  CHECK(idle.received().find("HTTP/1.1 200") == 0);
}

TEST_CASE("the connection limit holds and frees up", "[metrics][server][limits]") {
  Loop loop;
  ServerLimits limits;
  limits.max_connections = 2;
  MetricsServer server(
      loop.get(), "127.0.0.1:0", [] { return "up 1\n"; }, limits);
  auto a = std::make_unique<RawClient>(server.port());
  RawClient b(server.port());
  REQUIRE(a->connected());
  REQUIRE(b.connected());
  // Both idle connections hold the two slots: a third client is not served.
  auto r = request(loop.get(), url(server.port()), "GET", "", 1500ms);
  CHECK(r.status == 0);
  a.reset();
  bool served = false;
  CHECK(run_until(
      loop.get(),
      [&] {
        served = request(loop.get(), url(server.port()), "GET", "", 2s).status == 200;
        return served;
      },
      8s));
}

TEST_CASE("listen errors are clear", "[metrics][server]") {
  Loop loop;
  MetricsServer first(loop.get(), "127.0.0.1:0", [] { return ""; });
  const std::string taken = "127.0.0.1:" + std::to_string(first.port());
  try {
    MetricsServer second(loop.get(), taken, [] { return ""; });
    FAIL("second server on the same port started");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "cannot listen on " + taken + ": Address already in use");
  }
  try {
    MetricsServer other(loop.get(), "192.0.2.1:0", [] { return ""; });  // not a local address
    FAIL("bound a foreign address");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "cannot listen on 192.0.2.1:0: Cannot assign requested address");
  }
  for (const char* bad : {"", "localhost:9772", "127.0.0.1", "127.0.0.1:70000", "[::1]"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(MetricsServer(loop.get(), bad, [] { return ""; }), std::invalid_argument);
  }
}

TEST_CASE("parse_listen accepts IPv4 and bracketed IPv6 literals", "[metrics][server]") {
  auto v4 = parse_listen("127.0.0.1:9772");
  REQUIRE(v4);
  CHECK(v4->addr.ss_family == AF_INET);
  CHECK(ntohs(reinterpret_cast<const sockaddr_in*>(&v4->addr)->sin_port) == 9772);
  auto v6 = parse_listen("[::1]:0");
  REQUIRE(v6);
  CHECK(v6->addr.ss_family == AF_INET6);
  CHECK_FALSE(parse_listen("::1:80"));
  CHECK_FALSE(parse_listen("127.0.0.1:-1"));
  CHECK_FALSE(parse_listen("127.0.0.1:+80"));
  CHECK_FALSE(parse_listen("[::1]:123456"));
}

TEST_CASE("the server listens on IPv6 loopback", "[metrics][server]") {
  Loop loop;
  MetricsServer server(loop.get(), "[::1]:0", [] { return "v6 1\n"; });
  auto r = request(loop.get(), "http://[::1]:" + std::to_string(server.port()) + "/metrics");
  INFO(r.error);
  CHECK(r.status == 200);
  CHECK(r.body == "v6 1\n");
  // Only ::1: the IPv4 loopback is not served by this socket.
  auto v4 = request(loop.get(), url(server.port()), "GET", "", 2s);
  CHECK(v4.status == 0);
}

TEST_CASE("promtool accepts a fully populated scrape", "[metrics][promtool]") {
  // Proves the check can fail: promtool must reject a counter without _total.
  const auto bad = promtool_check(
      "# HELP bad_counter X.\n# TYPE bad_counter counter\n"
      "bad_counter 1\n");
  INFO("promtool output on a bad input: " << bad.output);
  REQUIRE(bad.exit_code != 127);  // 127: the shell found no promtool (Debian package prometheus)
  REQUIRE(bad.exit_code != 0);
  CHECK(bad.output.find("bad_counter") != std::string::npos);

  Loop loop;
  DaemonMetrics m("0.1.0", core::instant_from_ms(1700000000000));
  populate(m);
  MetricsServer server(loop.get(), "127.0.0.1:0", [&] { return m.render(); });
  auto r = request(loop.get(), url(server.port()));
  INFO(r.error);
  REQUIRE(r.status == 200);
  // All 20 families are in the scrape.
  std::size_t families = 0;
  for (std::size_t p = 0; (p = r.body.find("# TYPE ", p)) != std::string::npos; ++p) ++families;
  CHECK(families == 20);

  const auto check = promtool_check(r.body);
  INFO("promtool output: " << check.output);
  CHECK(check.exit_code == 0);
  CHECK(check.output.empty());
}
