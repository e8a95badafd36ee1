// The agent's HTTP side in-process on loopback: the protocol's answers (200, 401, 413, 400, 403,
// 404, 405, 503 + Retry-After), real probes run by the agent's own dispatcher, and the deadline.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "daemon/agent/agent_server.hpp"
#include "tests/agent/agent_rig.hpp"
#include "tests/probes/probe_rig.hpp"

using nlohmann::json;
using namespace fo::test;

namespace {

const std::string kToken = "s3cret-token_1";
const std::string kAuth = "Authorization: Bearer " + kToken;

fo::agent::AgentServerOptions options() {
  fo::agent::AgentServerOptions o;
  o.listen = "127.0.0.1:0";
  o.token = kToken;
  o.location.name = "probe-host";
  return o;
}

json tcp_probe(const std::string& name, const std::string& address, const std::string& extra = "") {
  json p = {{"kind", "tcp"}, {"name", name}, {"address", address}};
  if (!extra.empty()) p["expect"] = extra;
  return p;
}

std::string request(const json& probes, int deadline_ms = 3000, uint64_t round = 42) {
  return json{{"version", 1},
              {"group", "shop"},
              {"round", round},
              {"deadline_ms", deadline_ms},
              {"probes", probes}}
      .dump();
}

struct Agent {
  Rig rig;
  fo::agent::AgentServer server;
  explicit Agent(fo::agent::AgentServerOptions o = options())
      : server(rig.loop.get(), rig.dispatcher, std::move(o)) {}
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(server.port()) + path;
  }
  HttpReply post(const std::string& body, std::vector<std::string> headers = {kAuth}) {
    return http(rig, url("/v1/probe"), "POST", body, headers);
  }
};

}  // namespace

TEST_CASE("agent: health answers 200 and a valid round runs the probes", "[agent][server]") {
  Agent agent;
  auto health = http(agent.rig, agent.url("/v1/health"), "GET");
  CHECK(health.status == 200);
  CHECK(json::parse(health.body)["status"] == "ok");

  Listener up;
  const int down = unused_port();
  auto reply =
      agent.post(request({{{"site", "primary"}, {"probe", tcp_probe("up", up.address())}},
                          {{"site", "secondary"},
                           {"probe", tcp_probe("down", "127.0.0.1:" + std::to_string(down))}}}));
  REQUIRE(reply.status == 200);
  const json j = json::parse(reply.body);
  CHECK(j["version"] == 1);
  CHECK(j["round"] == 42);
  REQUIRE(j["results"].size() == 2);
  CHECK(j["results"][0] == json{{"site", "primary"},
                                {"probe", "up"},
                                {"ok", true},
                                {"latency_ms", j["results"][0]["latency_ms"]},
                                {"error", ""}});
  CHECK(j["results"][0]["latency_ms"].get<double>() > 0);
  CHECK(j["results"][1]["site"] == "secondary");
  CHECK(j["results"][1]["ok"] == false);
  CHECK(j["results"][1]["error"] == "tcp: connection refused");
  CHECK(agent.server.stats().answered == 1);
  CHECK(agent.server.active() == 0);
}

TEST_CASE("agent: a missing or wrong token is 401 and runs nothing", "[agent][server]") {
  Agent agent;
  Listener up;
  const std::string body =
      request({{{"site", "primary"}, {"probe", tcp_probe("up", up.address())}}});
  for (const std::vector<std::string>& headers :
       {std::vector<std::string>{},
        {"Authorization: Bearer wrong"},
        {"Authorization: Bearer " + kToken + "x"},
        {"Authorization: Basic " + kToken},
        {"Authorization: Bearer " + kToken.substr(0, kToken.size() - 1)}}) {
    auto reply = agent.post(body, headers);
    CHECK(reply.status == 401);
    CHECK(json::parse(reply.body)["error"] == "missing or wrong bearer token");
  }
  CHECK(agent.server.stats().unauthorized == 5);
  CHECK(agent.server.stats().answered == 0);
  CHECK(agent.rig.dispatcher.in_flight() == 0);
}

TEST_CASE("agent: an oversized body is 413", "[agent][server]") {
  auto o = options();
  o.max_request_bytes = 1024;
  Agent agent(o);
  const std::string big = request(
      {{{"site", "primary"}, {"probe", tcp_probe("x", "127.0.0.1:1", std::string(3000, 'a'))}}});
  auto reply = agent.post(big);
  CHECK(reply.status == 413);
  CHECK(json::parse(reply.body)["error"] == "request larger than 1024 bytes");
  // Without a Content-Length (chunked), the body is counted as it arrives.
  reply = agent.post(big, {kAuth, "Transfer-Encoding: chunked"});
  CHECK(reply.status == 413);
  CHECK(agent.server.stats().too_large == 2);
}

TEST_CASE("agent: malformed requests are 400 with a JSON error", "[agent][server]") {
  Agent agent;
  auto reply = agent.post("{not json");
  CHECK(reply.status == 400);
  CHECK(json::parse(reply.body)["error"] == "body is not valid JSON");
  reply = agent.post(request({{{"site", "primary"}, {"probe", tcp_probe("x", "localhost:1")}}}));
  CHECK(reply.status == 400);
  CHECK(json::parse(reply.body)["error"].get<std::string>().find("probes[0]: probe.address") == 0);
  CHECK(http(agent.rig, agent.url("/v1/other"), "POST", "{}", {kAuth}).status == 404);
  CHECK(http(agent.rig, agent.url("/v1/probe"), "GET", "", {kAuth}).status == 405);
}

TEST_CASE("agent: exec probes are refused unless allow_exec", "[agent][server]") {
  const json exec = {{"kind", "exec"}, {"name", "true"}, {"argv", {"/bin/true"}}};
  const std::string body = request({{{"site", "primary"}, {"probe", exec}}});
  {
    Agent agent;
    auto reply = agent.post(body);
    CHECK(reply.status == 403);
    CHECK(json::parse(reply.body)["error"] ==
          "probes[0]: exec probes are not allowed on this agent (allow_exec = false)");
  }
  auto o = options();
  o.allow_exec = true;
  Agent agent(o);
  auto reply = agent.post(body);
  REQUIRE(reply.status == 200);
  CHECK(json::parse(reply.body)["results"][0]["ok"] == true);
}

TEST_CASE("agent: overload answers 503 with Retry-After", "[agent][server]") {
  Listener silent;  // accepts, never answers: the tcp probe waits for "PONG"
  const std::string slow =
      request({{{"site", "primary"}, {"probe", tcp_probe("slow", silent.address(), "PONG")}}}, 800);
  SECTION("too many requests at once") {
    auto o = options();
    o.max_concurrent_requests = 1;
    Agent agent(o);
    std::optional<HttpReply> first;
    const auto t0 = std::chrono::steady_clock::now();
    start_http(agent.rig, agent.url("/v1/probe"), "POST", slow, {kAuth}, first);
    REQUIRE(run_until(agent.rig.loop.get(), [&] { return agent.server.active() == 1; }));
    auto second = agent.post(slow);
    CHECK(second.status == 503);
    CHECK(second.retry_after == 1);
    CHECK(json::parse(second.body)["error"] == "overloaded: too many requests at once");
    REQUIRE(run_until(agent.rig.loop.get(), [&] { return first.has_value(); }));
    // The probe did not finish within the deadline: no result for it, not a failure.
    CHECK(first->status == 200);
    CHECK(json::parse(first->body)["results"].empty());
    CHECK(ms_since(t0) < 1500);
    CHECK(agent.server.stats().overloaded == 1);
  }
  SECTION("over the request rate") {
    auto o = options();
    o.max_requests_per_second = 0.25;
    Agent agent(o);
    Listener up;
    const std::string quick =
        request({{{"site", "primary"}, {"probe", tcp_probe("up", up.address())}}});
    CHECK(agent.post(quick).status == 200);
    auto second = agent.post(quick);
    CHECK(second.status == 503);
    CHECK(second.retry_after >= 3);
    CHECK(second.retry_after <= 4);
  }
}

namespace {

// A stand-in kind whose checks take 30 ms each and count how many run at once.
struct CountingPlugin : fo::probes::ProbePlugin {
  sd_event* event;
  int running = 0, most = 0;
  std::vector<std::unique_ptr<fo::platform::Timer>> timers;
  explicit CountingPlugin(sd_event* e) : event(e) {}
  void start(const fo::config::Probe&, const fo::config::Location&,
             std::function<void(fo::probes::ProbeResult)> done) override {
    most = std::max(most, ++running);
    auto* t = new fo::platform::Timer(event, [this, done] {
      --running;
      done(fo::probes::ProbeResult::success());
    });
    timers.emplace_back(t);
    t->arm_in(std::chrono::milliseconds(30));
  }
};

}  // namespace

TEST_CASE("dispatcher: the concurrency limit queues checks, never drops them",
          "[agent][dispatcher]") {
  Rig rig;
  auto plugin = std::make_unique<CountingPlugin>(rig.loop.get());
  CountingPlugin* counting = plugin.get();
  rig.dispatcher.register_plugin("slow", std::move(plugin));
  rig.dispatcher.set_max_concurrent(3);
  fo::config::Probe p;
  p.kind = "slow";
  int done = 0;
  for (int i = 0; i < 20; ++i)
    rig.dispatcher.start(p, {}, [&](fo::probes::ProbeResult r) {
      CHECK(r.ok);
      CHECK_FALSE(r.missing);
      ++done;
    });
  CHECK(rig.dispatcher.in_flight() == 20);
  CHECK(rig.dispatcher.queued() == 17);
  REQUIRE(run_until(rig.loop.get(), [&] { return done == 20; }));
  CHECK(counting->most == 3);
  CHECK(rig.dispatcher.in_flight() == 0);
  CHECK(rig.dispatcher.queued() == 0);
}
