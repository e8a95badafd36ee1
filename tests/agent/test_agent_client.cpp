// The daemon's AgentClient against a real in-process agent (plain and TLS) and against fake
// agents that misbehave: garbage, a huge body, a wrong round, unknown probes, silence, a late
// answer, 503 with Retry-After, no agent at all. Whatever happens, the outcome is "missing"
// (never failed results), within the deadline, and the agent is backed off.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "daemon/agent/agent_server.hpp"
#include "daemon/daemon_round.hpp"
#include "probes/agent_client.hpp"
#include "tests/agent/agent_rig.hpp"
#include "tests/agent/fake_agent.hpp"
#include "tests/integration/harness.hpp"
#include "tests/probes/probe_rig.hpp"

using nlohmann::json;
using namespace fo::test;
using fo::probes::AgentClient;
using fo::probes::AgentOutcome;

namespace {

const std::string kToken = "t0ken";

struct Setup {
  TempDir dir;
  Rig rig;
  Listener up;
  std::vector<fo::probes::agent::WireProbe> probes;
  Setup() {
    write_file(dir / "token", kToken + "\n", 0600);
    fo::config::Probe p;
    p.kind = "tcp";
    p.name = "up";
    p.tcp.address = up.address();
    p.tcp.endpoint = {"127.0.0.1", up.port()};
    p.tcp.timeout = std::chrono::seconds(2);
    probes.push_back({fo::core::Site::primary, p});
    p.name = "down";
    const int port = unused_port();
    p.tcp.address = "127.0.0.1:" + std::to_string(port);
    p.tcp.endpoint = {"127.0.0.1", port};
    probes.push_back({fo::core::Site::secondary, p});
  }
  fo::config::Location location(const std::string& url) const {
    fo::config::Location l;
    l.name = "remote";
    l.kind = fo::config::LocationKind::agent;
    l.agent.url = url;
    l.agent.token_file = dir / "token";
    return l;
  }
  AgentOutcome query(AgentClient& c, std::chrono::milliseconds deadline = std::chrono::seconds(3),
                     uint64_t round = 9) {
    std::optional<AgentOutcome> out;
    c.query("shop", round, deadline, probes, [&](AgentOutcome o) { out = std::move(o); });
    CHECK_FALSE(out.has_value());  // never synchronous
    REQUIRE(run_until(
        rig.loop.get(), [&] { return out.has_value(); }, deadline + std::chrono::seconds(2)));
    return *out;
  }
};

// A reply naming the request's round, with the given results.
FakeReply answer(const FakeRequest& r, const json& results) {
  const json req = json::parse(r.body);
  return make_reply(200,
                    json{{"version", 1}, {"round", req["round"]}, {"results", results}}.dump());
}

}  // namespace

TEST_CASE("agent client: a round through a real agent", "[agent][client]") {
  Setup s;
  fo::agent::AgentServerOptions o;
  o.listen = "127.0.0.1:0";
  o.token = kToken;
  fo::agent::AgentServer server(s.rig.loop.get(), s.rig.dispatcher, o);
  AgentClient client(s.rig.curl, s.location("http://127.0.0.1:" + std::to_string(server.port())));
  const AgentOutcome out = s.query(client);
  INFO(out.error);
  REQUIRE(out.ok);
  REQUIRE(out.results.size() == 2);
  CHECK(out.results[0].probe == "up");
  CHECK(out.results[0].result.ok);
  CHECK(out.results[1].site == fo::core::Site::secondary);
  CHECK(out.results[1].result.error == "tcp: connection refused");
  CHECK(client.status().empty());
  CHECK_FALSE(client.backing_off());
}

TEST_CASE("agent client: a round over TLS", "[agent][client][tls]") {
  Setup s;
  const auto gen = run({"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                        "-keyout", s.dir / "key.pem", "-out", s.dir / "cert.pem", "-days", "2",
                        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"},
                       s.dir, std::chrono::seconds(30));
  REQUIRE(gen.exit_code == 0);
  fo::agent::AgentServerOptions o;
  o.listen = "127.0.0.1:0";
  o.token = kToken;
  o.tls_cert_pem = read_file(s.dir / "cert.pem");
  o.tls_key_pem = read_file(s.dir / "key.pem");
  fo::agent::AgentServer server(s.rig.loop.get(), s.rig.dispatcher, o);
  const std::string url = "https://127.0.0.1:" + std::to_string(server.port());
  SECTION("trusted through ca_file") {
    auto loc = s.location(url);
    loc.agent.ca_file = s.dir / "cert.pem";
    AgentClient client(s.rig.curl, loc);
    const AgentOutcome out = s.query(client);
    INFO(out.error);
    CHECK(out.ok);
    CHECK(out.results.size() == 2);
  }
  SECTION("an untrusted certificate gives no results") {
    AgentClient client(s.rig.curl, s.location(url));
    const AgentOutcome out = s.query(client);
    CHECK_FALSE(out.ok);
    CHECK(out.results.empty());
    CHECK(out.error.rfind("agent: ", 0) == 0);
  }
}

TEST_CASE("agent client: a misbehaving agent makes the location missing", "[agent][client]") {
  Setup s;
  std::function<FakeReply(const FakeRequest&)> reply;
  std::string expected;
  auto deadline = std::chrono::milliseconds(1500);
  SECTION("garbage") {
    reply = [](const FakeRequest&) { return make_reply(200, "<html>hello</html>"); };
    expected = "agent: invalid reply: not valid JSON";
  }
  SECTION("a huge body") {
    reply = [](const FakeRequest&) {
      FakeReply r;
      r.huge = 3 * 1024 * 1024;
      return r;
    };
    expected = "agent: reply larger than 1048576 bytes";
  }
  SECTION("a wrong round") {
    reply = [](const FakeRequest&) {
      return make_reply(200, R"({"version":1,"round":1,"results":[]})");
    };
    expected = "agent: invalid reply: round does not match the request (9)";
  }
  SECTION("a probe that was not asked for") {
    reply = [](const FakeRequest& r) {
      return answer(r, json::array({{{"site", "primary"},
                                     {"probe", "db"},
                                     {"ok", false},
                                     {"latency_ms", 1},
                                     {"error", "x"}}}));
    };
    expected = "agent: invalid reply: results[0].probe: db was not asked for";
  }
  SECTION("an agent that never answers") {
    reply = [](const FakeRequest&) {
      FakeReply r;
      r.never_answer = true;
      return r;
    };
    deadline = std::chrono::milliseconds(400);
    expected = "agent: no answer within 400 ms";
  }
  SECTION("an answer after the deadline") {
    reply = [](const FakeRequest& r) {
      FakeReply out = answer(r, json::array());
      out.delay = std::chrono::milliseconds(1500);
      return out;
    };
    deadline = std::chrono::milliseconds(300);
    expected = "agent: no answer within 300 ms";
  }
  SECTION("a token refused") {
    reply = [](const FakeRequest&) {
      return make_reply(401, R"({"version":1,"error":"missing or wrong bearer token"})");
    };
    expected = "agent: HTTP 401 (token refused): missing or wrong bearer token";
  }
  FakeAgent fake(reply);
  AgentClient client(s.rig.curl, s.location(fake.url()));
  const auto t0 = std::chrono::steady_clock::now();
  const AgentOutcome out = s.query(client, deadline);
  CHECK(ms_since(t0) < deadline.count() + 500);
  CHECK_FALSE(out.ok);
  CHECK(out.results.empty());
  CHECK(out.error == expected);
  CHECK(client.backing_off());
  CHECK(client.status().rfind(expected, 0) == 0);
  // The request carried the token and the group's probes.
  REQUIRE(fake.requests().size() == 1);
  const auto req = fake.requests()[0];
  CHECK(req.head.find("POST /v1/probe HTTP/1.1") == 0);
  CHECK(req.head.find("Authorization: Bearer t0ken") != std::string::npos);
  const json body = json::parse(req.body);
  CHECK(body["group"] == "shop");
  CHECK(body["probes"].size() == 2);
  CHECK(body["deadline_ms"].get<int64_t>() < deadline.count());
}

TEST_CASE("agent client: 503 with Retry-After is honoured and nothing is sent meanwhile",
          "[agent][client]") {
  Setup s;
  FakeAgent fake([](const FakeRequest&) {
    return make_reply(503, R"({"version":1,"error":"overloaded: too many requests at once"})",
                      "Retry-After: 30\r\n");
  });
  AgentClient client(s.rig.curl, s.location(fake.url()));
  AgentOutcome out = s.query(client);
  CHECK(out.error == "agent: HTTP 503 (overloaded): overloaded: too many requests at once");
  CHECK(client.backoff_left() > std::chrono::seconds(29));
  for (int round = 0; round < 5; ++round) {
    out = s.query(client);
    CHECK_FALSE(out.ok);
    CHECK(out.error.rfind("agent: backing off (", 0) == 0);
  }
  CHECK(fake.connections() == 1);
  CHECK(client.requests_sent() == 1);
}

TEST_CASE("agent client: an unreachable agent is backed off exponentially with jitter",
          "[agent][client]") {
  Setup s;
  fo::probes::AgentClientOptions o;
  o.backoff_initial = std::chrono::milliseconds(100);
  o.backoff_max = std::chrono::milliseconds(1000);
  o.seed = 7;
  AgentClient client(s.rig.curl, s.location("http://127.0.0.1:" + std::to_string(unused_port())),
                     o);
  for (int failure = 1; failure <= 6; ++failure) {
    REQUIRE(run_until(
        s.rig.loop.get(), [&] { return !client.backing_off(); }, std::chrono::seconds(3)));
    const AgentOutcome out = s.query(client);
    CHECK_FALSE(out.ok);
    CHECK(out.error.rfind("agent: cannot connect", 0) == 0);
    CHECK(client.consecutive_failures() == failure);
    const int64_t full = std::min<int64_t>(100 << (failure - 1), 1000);
    INFO("failure " << failure);
    CHECK(client.backoff_left().count() <= full);
    CHECK(client.backoff_left().count() >= full / 2 - 30);
  }
  CHECK(client.requests_sent() == 6);
}

TEST_CASE("agent client: a token file others can read is refused", "[agent][client]") {
  Setup s;
  FakeAgent fake([](const FakeRequest& r) { return answer(r, json::array()); });
  chmod((s.dir / "token").c_str(), 0644);
  AgentClient client(s.rig.curl, s.location(fake.url()));
  const AgentOutcome out = s.query(client);
  CHECK_FALSE(out.ok);
  CHECK(out.error.rfind("agent: token_file: ", 0) == 0);
  CHECK(fake.connections() == 0);
}

TEST_CASE("rounds: jitter stays within 5% and a seed makes it repeatable", "[agent][round]") {
  std::mt19937_64 a(42), b(42);
  const fo::core::Millis interval(10000);
  bool varied = false;
  fo::core::Millis first = fo::round_jitter(interval, a);
  CHECK(first == fo::round_jitter(interval, b));
  for (int i = 0; i < 1000; ++i) {
    const auto j = fo::round_jitter(interval, a);
    CHECK(j == fo::round_jitter(interval, b));
    CHECK(std::abs(j.count()) <= 500);
    varied = varied || j != first;
  }
  CHECK(varied);
  CHECK(fo::round_deadline(interval) == fo::core::Millis(8000));
}
