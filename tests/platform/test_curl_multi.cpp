// Tests of CurlMulti: libcurl multi driven by sd-event, against a real loopback HTTP server.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <set>
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

// --- the private epoll set ------------------------------------------------------------------

namespace {

std::size_t count_bytes(char*, std::size_t size, std::size_t nmemb, void* userp) {
  *static_cast<std::size_t*>(userp) += size * nmemb;
  return size * nmemb;
}

// Records the number of every socket curl opens (CURLOPT_SOCKOPTFUNCTION sees each one).
int record_fd(void* userp, curl_socket_t fd, curlsocktype) {
  static_cast<std::vector<int>*>(userp)->push_back(fd);
  return CURL_SOCKOPT_OK;
}

CURL* fresh_get(CURL* h, const std::string& url) {
  REQUIRE(h != nullptr);
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(h, CURLOPT_PROXY, "");
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &discard);
  curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
  curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
  return h;
}

}  // namespace

TEST_CASE("CurlMulti: answers, resets, refusals and close-delimited bodies mixed in one set",
          "[platform][curl]") {
  TestHttpServer server;
  server.route("/ok", Route{});
  server.route("/reset", Route{.reset = true});
  server.route("/close", Route{.huge_body = 100000, .no_content_length = true});
  const std::string refused = "http://127.0.0.1:" + std::to_string(closed_port()) + "/";
  auto loop = make_event();
  CurlMulti multi(loop.get());
  constexpr int kRounds = 60;
  int done = 0, ok = 0, reset = 0, refused_n = 0, full_bodies = 0;
  std::vector<std::size_t> received(kRounds, 0);
  for (int i = 0; i < kRounds; ++i) {
    multi.add(make_get(server.url("/ok")), [&](CURLcode rc, CURL* h) {
      ++done;
      if (rc == CURLE_OK && status_of(h) == 200) ++ok;
    });
    multi.add(make_get(server.url("/reset")), [&](CURLcode rc, CURL*) {
      ++done;
      if (rc == CURLE_RECV_ERROR || rc == CURLE_GOT_NOTHING) ++reset;
    });
    multi.add(make_get(refused), [&](CURLcode rc, CURL*) {
      ++done;
      if (rc == CURLE_COULDNT_CONNECT) ++refused_n;
    });
    // The server's FIN ends the body: EPOLLHUP arrives with data still to read.
    CURL* h = make_get(server.url("/close"));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &count_bytes);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &received[static_cast<std::size_t>(i)]);
    multi.add(h, [&, i](CURLcode rc, CURL*) {
      ++done;
      if (rc == CURLE_OK && received[static_cast<std::size_t>(i)] == 100000) ++full_bodies;
    });
  }
  REQUIRE(run_until(
      loop.get(), [&] { return done == 4 * kRounds; }, std::chrono::seconds(30)));
  CHECK(ok == kRounds);
  CHECK(reset == kRounds);
  CHECK(refused_n == kRounds);
  CHECK(full_bodies == kRounds);
  CHECK(multi.in_flight() == 0);
  CHECK(multi.watched_sockets() == 0);  // every socket left the set when curl closed it
}

TEST_CASE("CurlMulti: transfers started from callbacks get reused fd numbers", "[platform][curl]") {
  TestHttpServer server;
  server.route("/ok", Route{});
  auto loop = make_event();
  CurlMulti multi(loop.get());
  std::vector<int> fds;
  constexpr int kChains = 3, kPerChain = 40;
  int completed = 0, failed = 0;
  std::function<void(CURLcode, CURL*)> next = [&](CURLcode rc, CURL* h) {
    if (rc == CURLE_OK && status_of(h) == 200)
      ++completed;
    else
      ++failed;
    if (completed + failed + kChains <= kChains * kPerChain) {
      CURL* e = fresh_get(multi.take_easy(), server.url("/ok"));
      curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, &record_fd);
      curl_easy_setopt(e, CURLOPT_SOCKOPTDATA, &fds);
      multi.add(e, next, CurlMulti::AfterDone::reuse);
    }
  };
  for (int i = 0; i < kChains; ++i) {
    CURL* e = fresh_get(multi.take_easy(), server.url("/ok"));
    curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, &record_fd);
    curl_easy_setopt(e, CURLOPT_SOCKOPTDATA, &fds);
    multi.add(e, next, CurlMulti::AfterDone::reuse);
  }
  REQUIRE(run_until(
      loop.get(), [&] { return completed + failed == kChains * kPerChain; },
      std::chrono::seconds(30)));
  CHECK(failed == 0);
  REQUIRE(fds.size() == static_cast<std::size_t>(kChains * kPerChain));
  // The kernel hands out the lowest free number, so closed sockets' numbers come back: the set
  // saw each number leave and return many times.
  const std::set<int> distinct(fds.begin(), fds.end());
  CHECK(distinct.size() < fds.size() / 4);
  CHECK(multi.watched_sockets() == 0);
  // 120 transfers needed no more handles than were alive at once: each chain's own, plus the
  // one a callback takes while its finished handle has not gone back yet.
  CHECK(multi.pooled_handles() >= static_cast<std::size_t>(kChains));
  CHECK(multi.pooled_handles() <= static_cast<std::size_t>(kChains + 1));
}

TEST_CASE("CurlMulti: destroyed by the first of many completions of one wake-up",
          "[platform][curl]") {
  TestHttpServer server;
  server.route("/ok", Route{});
  server.route("/silent", Route{.never_answer = true});
  auto loop = make_event();
  auto multi = std::make_unique<CurlMulti>(loop.get());
  int called = 0;
  for (int i = 0; i < 5; ++i)
    multi->add(
        fresh_get(multi->take_easy(), server.url("/silent")), [&](CURLcode, CURL*) { ++called; },
        CurlMulti::AfterDone::reuse);
  // Park a handle in the pool too: destruction must free it.
  bool warm = false;
  multi->add(
      fresh_get(multi->take_easy(), server.url("/ok")), [&](CURLcode, CURL*) { warm = true; },
      CurlMulti::AfterDone::reuse);
  REQUIRE(run_until(loop.get(), [&] { return warm; }));
  REQUIRE(multi->pooled_handles() == 1);
  // Many answers land together; the first callback destroys the CurlMulti.
  REQUIRE(run_until(loop.get(), [&] { return server.requests() == 6; }));
  for (int i = 0; i < 40; ++i)
    multi->add(
        fresh_get(multi->take_easy(), server.url("/ok")),
        [&](CURLcode, CURL*) {
          ++called;
          multi.reset();
        },
        CurlMulti::AfterDone::reuse);
  REQUIRE(run_until(loop.get(), [&] { return multi == nullptr; }));
  CHECK(called == 1);
  REQUIRE(run_until(loop.get(), [&] { return server.open_connections() == 0; }));
  for (int i = 0; i < 5; ++i) sd_event_run(loop.get(), 0);
  CHECK(called == 1);
  CHECK(sd_event_run(loop.get(), 0) == 0);  // no source of ours is left on the loop
}

// --- easy handle reuse ----------------------------------------------------------------------

TEST_CASE("CurlMulti: a reused handle keeps nothing of a failed transfer's options",
          "[platform][curl]") {
  TestHttpServer server;
  server.route("/reset", Route{.reset = true});
  server.route("/silent", Route{.never_answer = true});
  server.route("/slow", Route{.delay = std::chrono::milliseconds(400)});
  auto loop = make_event();
  CurlMulti multi(loop.get());

  // 1: a POST with a custom header, an error buffer and a body sink, ended by a reset.
  CURL* first = multi.take_easy();
  REQUIRE(first != nullptr);
  auto errbuf = std::make_unique<char[]>(CURL_ERROR_SIZE);
  auto sink = std::make_unique<std::size_t>(0);
  curl_slist* headers = curl_slist_append(nullptr, "X-Stale: yes");
  REQUIRE(headers != nullptr);
  fresh_get(first, server.url("/reset"));
  curl_easy_setopt(first, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(first, CURLOPT_POSTFIELDS, "stale-body");
  curl_easy_setopt(first, CURLOPT_ERRORBUFFER, errbuf.get());
  curl_easy_setopt(first, CURLOPT_WRITEFUNCTION, &count_bytes);
  curl_easy_setopt(first, CURLOPT_WRITEDATA, sink.get());
  CURLcode rc1 = CURLE_OK;
  bool done1 = false;
  multi.add(
      first,
      [&](CURLcode rc, CURL*) {
        rc1 = rc;
        done1 = true;
      },
      CurlMulti::AfterDone::reuse);
  REQUIRE(run_until(loop.get(), [&] { return done1; }));
  CHECK(rc1 != CURLE_OK);
  CHECK(multi.pooled_handles() == 1);
  // Whatever the old options pointed at is gone: a stale pointer would be a use after free.
  curl_slist_free_all(headers);
  errbuf.reset();
  sink.reset();

  // 2: a short timeout that expires.
  CURL* second = multi.take_easy();
  CHECK(second == first);  // the very same handle, back from the pool
  CHECK(multi.pooled_handles() == 0);
  fresh_get(second, server.url("/silent"));
  curl_easy_setopt(second, CURLOPT_TIMEOUT_MS, 150L);
  CURLcode rc2 = CURLE_OK;
  bool done2 = false;
  multi.add(
      second,
      [&](CURLcode rc, CURL*) {
        rc2 = rc;
        done2 = true;
      },
      CurlMulti::AfterDone::reuse);
  REQUIRE(run_until(loop.get(), [&] { return done2; }));
  CHECK(rc2 == CURLE_OPERATION_TIMEDOUT);

  // 3: only a URL: a plain GET without the header, the body or the 150 ms timeout.
  CURL* third = multi.take_easy();
  CHECK(third == first);
  curl_easy_setopt(third, CURLOPT_URL, server.url("/slow").c_str());
  curl_easy_setopt(third, CURLOPT_PROXY, "");
  curl_easy_setopt(third, CURLOPT_WRITEFUNCTION, &discard);
  long status = 0;
  CURLcode rc3 = CURLE_FAILED_INIT;
  multi.add(
      third,
      [&](CURLcode rc, CURL* h) {
        rc3 = rc;
        status = status_of(h);
      },
      CurlMulti::AfterDone::reuse);
  REQUIRE(run_until(loop.get(), [&] { return status != 0 || rc3 != CURLE_FAILED_INIT; }));
  CHECK(rc3 == CURLE_OK);
  CHECK(status == 200);
  const auto seen = server.seen();
  REQUIRE(seen.size() == 3);
  CHECK(seen[0].method == "POST");
  CHECK(seen[0].head.find("X-Stale: yes") != std::string::npos);
  CHECK(seen[2].method == "GET");
  CHECK(seen[2].path == "/slow");
  CHECK(seen[2].head.find("X-Stale") == std::string::npos);
  CHECK(seen[2].head.find("Content-Length") == std::string::npos);
}

TEST_CASE("CurlMulti: the handle pool is bounded and only takes handles marked for reuse",
          "[platform][curl]") {
  TestHttpServer server;
  server.route("/ok", Route{});
  auto loop = make_event();
  CurlMulti multi(loop.get());
  bool first = false;
  multi.add(make_get(server.url("/ok")), [&](CURLcode, CURL*) { first = true; });
  REQUIRE(run_until(loop.get(), [&] { return first; }));
  CHECK(multi.pooled_handles() == 0);  // AfterDone::cleanup: not pooled

  const int count = static_cast<int>(CurlMulti::kMaxPooledHandles) + 20;
  int done = 0, good = 0;
  for (int i = 0; i < count; ++i)
    multi.add(
        fresh_get(multi.take_easy(), server.url("/ok")),
        [&](CURLcode rc, CURL*) {
          ++done;
          if (rc == CURLE_OK) ++good;
        },
        CurlMulti::AfterDone::reuse);
  multi.add(make_get(server.url("/ok")), [&](CURLcode rc, CURL*) {
    ++done;
    if (rc == CURLE_OK) ++good;
  });  // AfterDone::cleanup
  REQUIRE(run_until(
      loop.get(), [&] { return done == count + 1; }, std::chrono::seconds(30)));
  CHECK(good == count + 1);
  CHECK(multi.pooled_handles() == CurlMulti::kMaxPooledHandles);

  // Taking one out and giving it back leaves the pool at its bound.
  CURL* h = multi.take_easy();
  CHECK(multi.pooled_handles() == CurlMulti::kMaxPooledHandles - 1);
  bool again = false;
  multi.add(
      fresh_get(h, server.url("/ok")), [&](CURLcode rc, CURL*) { again = rc == CURLE_OK; },
      CurlMulti::AfterDone::reuse);
  REQUIRE(run_until(loop.get(), [&] { return multi.in_flight() == 0; }));
  CHECK(again);
  CHECK(multi.pooled_handles() == CurlMulti::kMaxPooledHandles);
}
