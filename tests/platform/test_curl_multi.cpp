// Tests of CurlMulti: libcurl multi driven by sd-event, against a real loopback HTTP server.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "daemon/platform/curl_multi.hpp"
#include "tests/platform/loop_util.hpp"
#include "tests/probes/test_http_server.hpp"

using fo::platform::CurlMulti;
using fo::platform::make_event;
using fo::test::Route;
using fo::test::run_until;
using fo::test::TestHttpServer;

namespace {

std::size_t discard(char*, std::size_t size, std::size_t nmemb, void*) {
  return size * nmemb;
}

CURL* make_get(const std::string& url, long timeout_ms = 5000) {
  CURL* h = curl_easy_init();
  REQUIRE(h != nullptr);
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(h, CURLOPT_PROXY, "");
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &discard);
  return h;
}

long status_of(CURL* h) {
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

// A loopback port nobody listens on (bound, then closed).
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

}  // namespace

TEST_CASE("CurlMulti: 200 concurrent requests on one loop all complete", "[platform][curl]") {
  TestHttpServer server;
  server.route("/ok", Route{});
  auto loop = make_event();
  CurlMulti multi(loop.get());
  constexpr int kCount = 200;
  int done = 0, good = 0;
  for (int i = 0; i < kCount; ++i) {
    multi.add(make_get(server.url("/ok")), [&](CURLcode rc, CURL* h) {
      ++done;
      if (rc == CURLE_OK && status_of(h) == 200) ++good;
    });
  }
  CHECK(multi.in_flight() == kCount);
  CHECK(done == 0);  // never synchronous
  REQUIRE(run_until(
      loop.get(), [&] { return done == kCount; }, std::chrono::seconds(30)));
  CHECK(good == kCount);
  CHECK(multi.in_flight() == 0);
  CHECK(server.requests() == kCount);
}

TEST_CASE("CurlMulti: a completion callback may add the next transfer", "[platform][curl]") {
  TestHttpServer server;
  server.route("/ok", Route{});
  auto loop = make_event();
  CurlMulti multi(loop.get());
  int completed = 0;
  std::function<void(CURLcode, CURL*)> next = [&](CURLcode rc, CURL*) {
    if (rc == CURLE_OK) ++completed;
    if (completed < 10 && rc == CURLE_OK) multi.add(make_get(server.url("/ok")), next);
  };
  multi.add(make_get(server.url("/ok")), next);
  REQUIRE(run_until(loop.get(), [&] { return completed == 10; }));
  CHECK(multi.in_flight() == 0);
}

TEST_CASE("CurlMulti: timeouts are driven by the timer source", "[platform][curl]") {
  TestHttpServer server;
  server.route("/silent", Route{.never_answer = true});
  auto loop = make_event();
  CurlMulti multi(loop.get());
  std::vector<CURLcode> results;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i)
    multi.add(make_get(server.url("/silent"), 200),
              [&](CURLcode rc, CURL*) { results.push_back(rc); });
  REQUIRE(run_until(
      loop.get(), [&] { return results.size() == 5; }, std::chrono::seconds(5)));
  const double took = fo::test::ms_since(t0);
  for (auto rc : results) CHECK(rc == CURLE_OPERATION_TIMEDOUT);
  CHECK(took >= 190.0);
  CHECK(took < 1500.0);
}

TEST_CASE("CurlMulti: refused connection completes with an error", "[platform][curl]") {
  auto loop = make_event();
  CurlMulti multi(loop.get());
  CURLcode result = CURLE_OK;
  bool done = false;
  const std::string url = "http://127.0.0.1:" + std::to_string(closed_port()) + "/";
  multi.add(make_get(url), [&](CURLcode rc, CURL*) {
    result = rc;
    done = true;
  });
  REQUIRE(run_until(
      loop.get(), [&] { return done; }, std::chrono::seconds(5)));
  CHECK(result == CURLE_COULDNT_CONNECT);
}

TEST_CASE("CurlMulti: cancel_all drops in-flight transfers without callbacks", "[platform][curl]") {
  TestHttpServer server;
  server.route("/silent", Route{.never_answer = true});
  server.route("/ok", Route{});
  auto loop = make_event();
  CurlMulti multi(loop.get());
  int called = 0;
  for (int i = 0; i < 10; ++i)
    multi.add(make_get(server.url("/silent")), [&](CURLcode, CURL*) { ++called; });
  REQUIRE(run_until(loop.get(), [&] { return server.requests() == 10; }));
  multi.post([&] { ++called; });
  multi.cancel_all();
  CHECK(multi.in_flight() == 0);
  // The server sees the connections go away; nothing is called back.
  REQUIRE(run_until(loop.get(), [&] { return server.open_connections() == 0; }));
  CHECK(called == 0);

  // The multi handle keeps working afterwards.
  long status = 0;
  multi.add(make_get(server.url("/ok")), [&](CURLcode rc, CURL* h) {
    if (rc == CURLE_OK) status = status_of(h);
  });
  REQUIRE(run_until(loop.get(), [&] { return status != 0; }));
  CHECK(status == 200);
}

TEST_CASE("CurlMulti: destruction with transfers in flight is clean", "[platform][curl]") {
  TestHttpServer server;
  server.route("/silent", Route{.never_answer = true});
  server.route("/slow", Route{.delay = std::chrono::milliseconds(5000)});
  auto loop = make_event();
  int called = 0;
  {
    CurlMulti multi(loop.get());
    for (int i = 0; i < 5; ++i) {
      multi.add(make_get(server.url("/silent")), [&](CURLcode, CURL*) { ++called; });
      multi.add(make_get(server.url("/slow")), [&](CURLcode, CURL*) { ++called; });
    }
    // One more that is not even connected yet.
    multi.add(make_get(server.url("/slow")), [&](CURLcode, CURL*) { ++called; });
    REQUIRE(run_until(loop.get(), [&] { return server.requests() >= 10; }));
  }
  CHECK(called == 0);
  REQUIRE(run_until(loop.get(), [&] { return server.open_connections() == 0; }));
  // Nothing of the CurlMulti is left on the loop: it has no sources that could fire.
  CHECK(sd_event_run(loop.get(), 0) == 0);
}

TEST_CASE("CurlMulti: a completion callback may destroy the CurlMulti", "[platform][curl]") {
  TestHttpServer server;
  server.route("/ok", Route{});
  server.route("/silent", Route{.never_answer = true});
  auto loop = make_event();
  auto multi = std::make_unique<CurlMulti>(loop.get());
  int called = 0;
  multi->add(make_get(server.url("/silent")), [&](CURLcode, CURL*) { ++called; });
  multi->add(make_get(server.url("/ok")), [&](CURLcode rc, CURL* h) {
    ++called;
    CHECK(rc == CURLE_OK);
    CHECK(status_of(h) == 200);  // the handle is still valid inside the callback
    multi.reset();
  });
  REQUIRE(run_until(loop.get(), [&] { return multi == nullptr; }));
  CHECK(called == 1);
  for (int i = 0; i < 5; ++i) sd_event_run(loop.get(), 0);
  CHECK(called == 1);
}

TEST_CASE("CurlMulti: post and failed add answer from the loop", "[platform][curl]") {
  auto loop = make_event();
  CurlMulti multi(loop.get());
  std::vector<std::string> events;
  multi.post([&] { events.push_back("post"); });
  multi.add(nullptr, [&](CURLcode rc, CURL*) {
    events.push_back(rc == CURLE_FAILED_INIT ? "failed_init" : "other");
  });
  CHECK(events.empty());
  CHECK(multi.in_flight() == 0);
  REQUIRE(run_until(loop.get(), [&] { return events.size() == 2; }));
  CHECK(events == std::vector<std::string>{"post", "failed_init"});
}
