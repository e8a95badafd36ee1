// platform::HttpServer on a real sd-event loop, loopback and port 0: the handler's view of a
// request, replies with extra headers, the body cap (413 by Content-Length and chunked), the
// connection limit, slow and idle clients, handler exceptions (500, the server lives on),
// parked requests answered later, and start-up errors.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "daemon/platform/event.hpp"
#include "daemon/platform/http_server.hpp"
#include "tests/metrics/http_util.hpp"

using namespace fo;
using namespace fo::platform;
using namespace std::chrono_literals;
using fo::metrics::test::RawClient;
using fo::metrics::test::request;
using fo::metrics::test::run_until;

namespace {

struct Loop {
  EventPtr event = make_event();
  sd_event* get() const { return event.get(); }
};

std::string url(uint16_t port, const std::string& path = "/") {
  return "http://127.0.0.1:" + std::to_string(port) + path;
}

HttpReply text(unsigned status, std::string body) {
  HttpReply r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

// What a handler saw, copied out of the call (the request's views die with it).
struct Seen {
  std::string method, path, body, header;
  bool body_read = false;
};

// Reads the body of every request and echoes it; records each call.
struct EchoHandler {
  std::vector<Seen>* calls;
  HttpAnswer operator()(const HttpRequest& r) const {
    calls->push_back({std::string(r.method), std::string(r.path), std::string(r.body),
                      std::string(r.header("X-Test").value_or("")), r.body_read});
    if (!r.body_read) return HttpNext::read_body;
    HttpReply reply = text(200, "got " + std::to_string(r.body.size()) + " bytes");
    reply.content_type = "application/x-echo";
    reply.headers.emplace_back("Retry-After", "7");
    return reply;
  }
};

// Sends a raw request and waits for the server to close the connection; returns what came back.
std::string raw_exchange(Loop& loop, uint16_t port, const std::string& bytes) {
  RawClient c(port);
  if (!c.connected() || !c.send(bytes)) return "(no connection)";
  if (!run_until(
          loop.get(), [&] { return c.closed_by_peer(); }, 5s))
    return "(not closed)";
  return c.received();
}

}  // namespace

TEST_CASE("http server: the handler sees method, path, headers and body", "[platform][http]") {
  Loop loop;
  std::vector<Seen> calls;
  HttpServer server(loop.get(), "127.0.0.1:0", EchoHandler{&calls});
  REQUIRE(server.port() != 0);

  auto r = request(loop.get(), url(server.port(), "/echo?x=1"), "POST", "hello");
  INFO(r.error);
  CHECK(r.status == 200);
  CHECK(r.body == "got 5 bytes");
  CHECK(r.has_header("Content-Type: application/x-echo"));
  CHECK(r.has_header("Retry-After: 7"));
  REQUIRE(calls.size() == 2);
  CHECK(calls[0].method == "POST");
  CHECK(calls[0].path == "/echo");  // no query string
  CHECK_FALSE(calls[0].body_read);
  CHECK(calls[0].body.empty());
  CHECK(calls[1].body_read);
  CHECK(calls[1].body == "hello");

  calls.clear();
  const std::string raw = raw_exchange(loop, server.port(),
                                       "PUT /h HTTP/1.1\r\nHost: x\r\nx-test: abc\r\n"
                                       "Content-Length: 3\r\nConnection: close\r\n\r\nxyz");
  CHECK(raw.find("HTTP/1.1 200") == 0);
  REQUIRE(calls.size() == 2);
  CHECK(calls[0].header == "abc");  // header names are case-insensitive
  CHECK(calls[1].body == "xyz");

  // HEAD: the reply's headers without its body.
  r = request(loop.get(), url(server.port()), "HEAD");
  CHECK(r.status == 200);
  CHECK(r.body.empty());
  CHECK(server.too_large() == 0);
  CHECK(server.errors() == 0);
}

TEST_CASE("http server: a reply on the first call skips the body", "[platform][http]") {
  Loop loop;
  int calls = 0;
  HttpServer server(loop.get(), "127.0.0.1:0", [&](const HttpRequest& r) -> HttpAnswer {
    ++calls;
    HttpReply reply = text(405, "no\n");
    reply.headers.emplace_back("Allow", "GET");
    if (r.method == "GET") reply = text(404, "not here\n");
    return reply;
  });
  auto r = request(loop.get(), url(server.port()), "POST", std::string(200000, 'x'));
  INFO(r.error);
  CHECK(r.status == 405);
  CHECK(r.has_header("Allow: GET"));
  CHECK(r.has_header("Content-Type: text/plain; charset=utf-8"));
  CHECK(request(loop.get(), url(server.port())).status == 404);
  CHECK(calls == 2);
}

TEST_CASE("http server: an oversized body is 413", "[platform][http][limits]") {
  Loop loop;
  std::vector<Seen> calls;
  HttpServerOptions o;
  o.max_body_bytes = 1000;
  o.too_large = text(400, "{\"error\":\"too big\"}");  // the status is forced to 413
  o.too_large.content_type = "application/json";
  HttpServer server(loop.get(), "127.0.0.1:0", EchoHandler{&calls}, o);

  // At the cap exactly: read and handed over.
  auto r = request(loop.get(), url(server.port()), "POST", std::string(1000, 'a'));
  CHECK(r.status == 200);
  CHECK(r.body == "got 1000 bytes");

  // Over it by Content-Length: refused before the body is read.
  calls.clear();
  r = request(loop.get(), url(server.port()), "POST", std::string(1001, 'a'));
  INFO(r.error);
  CHECK(r.status == 413);
  CHECK(r.body == "{\"error\":\"too big\"}");
  CHECK(r.has_header("Content-Type: application/json"));
  CHECK(calls.size() == 1);  // headers only

  // Chunked, no Content-Length: counted as it arrives; the handler never sees the body.
  calls.clear();
  const std::string chunk(600, 'b');
  const std::string raw = raw_exchange(
      loop, server.port(),
      "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
      "258\r\n" +
          chunk + "\r\n258\r\n" + chunk + "\r\n0\r\n\r\n");
  CHECK(raw.find("HTTP/1.1 413") == 0);
  CHECK(calls.size() == 1);
  CHECK(server.too_large() == 2);
}

TEST_CASE("http server: the connection limit holds and frees up", "[platform][http][limits]") {
  Loop loop;
  HttpServerOptions o;
  o.max_connections = 2;
  HttpServer server(
      loop.get(), "127.0.0.1:0", [](const HttpRequest&) -> HttpAnswer { return text(200, "ok"); },
      o);
  auto a = std::make_unique<RawClient>(server.port());
  RawClient b(server.port());
  REQUIRE(a->connected());
  REQUIRE(b.connected());
  // Both idle connections hold the two slots: a third client is not served.
  auto r = request(loop.get(), url(server.port()), "GET", "", 1500ms);
  CHECK(r.status == 0);
  a.reset();
  CHECK(run_until(
      loop.get(),
      [&] { return request(loop.get(), url(server.port()), "GET", "", 2s).status == 200; }, 8s));
}

TEST_CASE("http server: a slow client is timed out and blocks nobody", "[platform][http][limits]") {
  Loop loop;
  HttpServerOptions o;
  o.connection_timeout = 1s;
  std::vector<Seen> calls;
  HttpServer server(loop.get(), "127.0.0.1:0", EchoHandler{&calls}, o);

  RawClient slow(server.port());
  REQUIRE(slow.connected());
  // The body never comes in full.
  REQUIRE(slow.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc"));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) {
    auto r = request(loop.get(), url(server.port()), "POST", "12");
    INFO(r.error);
    CHECK(r.status == 200);
  }
  CHECK(run_until(
      loop.get(), [&] { return slow.closed_by_peer(); }, 5s));
  CHECK(std::chrono::steady_clock::now() - t0 >= 900ms);
  CHECK(slow.received().empty());
}

TEST_CASE("http server: a handler exception is a 500, not a crash", "[platform][http]") {
  Loop loop;
  bool throw_on_body = false;
  HttpServer server(loop.get(), "127.0.0.1:0", [&](const HttpRequest& r) -> HttpAnswer {
    if (r.path == "/int") throw 42;
    if (r.path == "/again") return HttpNext::read_body;  // asks twice: a handler bug
    if (!r.body_read && throw_on_body) return HttpNext::read_body;
    if (r.body_read || r.path == "/boom") throw std::runtime_error("secret detail");
    return text(200, "fine");
  });
  auto r = request(loop.get(), url(server.port(), "/boom"));
  INFO(r.error);
  CHECK(r.status == 500);
  CHECK(r.body.find("secret") == std::string::npos);
  CHECK(request(loop.get(), url(server.port(), "/int")).status == 500);
  throw_on_body = true;
  CHECK(request(loop.get(), url(server.port(), "/b"), "POST", "x").status == 500);
  CHECK(request(loop.get(), url(server.port(), "/again"), "POST", "x").status == 500);
  throw_on_body = false;
  CHECK(request(loop.get(), url(server.port(), "/ok")).status == 200);
  CHECK(server.errors() == 4);
}

TEST_CASE("http server: a parked request is answered later", "[platform][http]") {
  Loop loop;
  std::optional<uint64_t> parked;
  HttpServer* self = nullptr;
  HttpServer server(loop.get(), "127.0.0.1:0", [&](const HttpRequest& r) -> HttpAnswer {
    if (r.path == "/now") {  // answered from inside the handler call that parks it
      self->answer(r.id, text(200, "at once"));
      return HttpNext::answer_later;
    }
    parked = r.id;
    return HttpNext::answer_later;
  });
  self = &server;
  Timer later(loop.get(), [&] { CHECK(server.answer(*parked, text(202, "later"))); });

  std::optional<fo::metrics::test::HttpReply> reply;
  std::thread client([&] {
    reply = fo::metrics::test::blocking_request(url(server.port(), "/slow"), "GET", "", 5s);
  });
  CHECK(run_until(
      loop.get(), [&] { return parked.has_value(); }, 5s));
  CHECK(server.waiting() == 1);
  later.arm_in(core::Millis(200));
  run_until(
      loop.get(), [&] { return reply.has_value(); }, 6s);
  client.join();
  REQUIRE(reply);
  INFO(reply->error);
  CHECK(reply->status == 202);
  CHECK(reply->body == "later");
  CHECK(server.waiting() == 0);
  CHECK_FALSE(server.answer(*parked, text(200, "twice")));
  CHECK_FALSE(server.answer(999, text(200, "unknown")));

  auto r = request(loop.get(), url(server.port(), "/now"));
  CHECK(r.status == 200);
  CHECK(r.body == "at once");
}

TEST_CASE("http server: stopping with a parked request is clean", "[platform][http]") {
  Loop loop;
  auto server = std::make_unique<HttpServer>(
      loop.get(), "127.0.0.1:0",
      [](const HttpRequest&) -> HttpAnswer { return HttpNext::answer_later; });
  RawClient c(server->port());
  REQUIRE(c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  CHECK(run_until(
      loop.get(), [&] { return server->waiting() == 1; }, 5s));
  server.reset();  // ASan and the leak checker watch this one
  CHECK(run_until(
      loop.get(), [&] { return c.closed_by_peer(); }, 5s));
  CHECK(c.received().empty());
}

TEST_CASE("http server: start-up errors are clear", "[platform][http]") {
  Loop loop;
  const auto ok = [](const HttpRequest&) -> HttpAnswer { return text(200, ""); };
  HttpServer first(loop.get(), "127.0.0.1:0", ok);
  const std::string taken = "127.0.0.1:" + std::to_string(first.port());
  try {
    HttpServer second(loop.get(), taken, ok);
    FAIL("second server on the same port started");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "cannot listen on " + taken + ": Address already in use");
  }
  for (const char* bad : {"", "localhost:80", "127.0.0.1", "[::1]", "1.2.3.4:65536"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(HttpServer(loop.get(), bad, ok), std::invalid_argument);
  }
  HttpServerOptions o;
  o.tls_cert_pem = "not a certificate";
  o.tls_key_pem = "not a key";
  try {
    HttpServer tls(loop.get(), "127.0.0.1:0", ok, o);
    FAIL("started with a broken certificate");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("(check tls_cert and tls_key)") != std::string::npos);
  }
}

TEST_CASE("http server: parse_listen takes IP literals only", "[platform][http]") {
  auto v4 = parse_listen("127.0.0.1:9772");
  REQUIRE(v4);
  CHECK(v4->addr.ss_family == AF_INET);
  CHECK(ntohs(reinterpret_cast<const sockaddr_in*>(&v4->addr)->sin_port) == 9772);
  auto v6 = parse_listen("[::1]:0");
  REQUIRE(v6);
  CHECK(v6->addr.ss_family == AF_INET6);
  CHECK(v6->len == sizeof(sockaddr_in6));
  CHECK_FALSE(parse_listen("::1:80"));
  CHECK_FALSE(parse_listen("127.0.0.1:-1"));
  CHECK_FALSE(parse_listen("[::1]:123456"));
  CHECK_FALSE(parse_listen("example.org:80"));
}
