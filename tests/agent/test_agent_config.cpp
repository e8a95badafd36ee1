// Agent config, [[location]] kind = "agent" in failoverd.toml, and the wire form of probes:
// what the daemon sends must parse on the agent into the very same probe.
#include <catch2/catch.hpp>

#include <string>

#include "daemon/agent/agent_config.hpp"
#include "daemon/agent/agent_request.hpp"
#include "daemon/config/config.hpp"
#include "probes/agent_wire.hpp"

namespace {

using fo::config::ConfigException;

std::string agent_errors(const std::string& text) {
  try {
    fo::agent::parse_agent_config(text, "a.toml");
  } catch (const ConfigException& e) {
    return e.what();
  }
  return "";
}

std::string config_errors(const std::string& text) {
  try {
    fo::config::parse_config(text, "t.toml");
  } catch (const ConfigException& e) {
    return e.what();
  }
  return "";
}

const std::string kGroup =
    "[[group]]\nname = \"shop\"\n"
    "[group.primary]\nprobes = [ { kind = \"tcp\", address = \"127.0.0.1:80\" } ]\n"
    "[group.secondary]\nprobes = [ { kind = \"tcp\", address = \"127.0.0.1:81\" } ]\n";

}  // namespace

TEST_CASE("agent config: defaults and every key", "[agent][config]") {
  auto cfg = fo::agent::parse_agent_config(
      "[agent]\nlisten = \"127.0.0.1:9773\"\ntoken_file = \"/etc/failoverd/agent.token\"\n",
      "a.toml");
  CHECK(cfg.listen == "127.0.0.1:9773");
  CHECK(cfg.token_file == "/etc/failoverd/agent.token");
  CHECK_FALSE(cfg.allow_exec);
  CHECK(cfg.max_request_bytes == 64 * 1024);
  CHECK(cfg.location.name == "agent");
  CHECK(cfg.tls_cert.empty());

  cfg = fo::agent::parse_agent_config(
      "[agent]\nlisten = \"[::1]:0\"\ntoken_file = \"/t\"\nallow_exec = true\n"
      "max_request_bytes = 2048\nmax_probes_per_request = 3\nmax_concurrent_requests = 2\n"
      "max_requests_per_second = 0.5\nmax_concurrent_probes = 4\ntls_cert = \"/c.pem\"\n"
      "tls_key = \"/k.pem\"\nlocation = \"fra1\"\nsource_address = \"127.0.0.1\"\n"
      "log_level = \"debug\"\n",
      "a.toml");
  CHECK(cfg.allow_exec);
  CHECK(cfg.max_request_bytes == 2048);
  CHECK(cfg.max_probes_per_request == 3);
  CHECK(cfg.max_concurrent_requests == 2);
  CHECK(cfg.max_requests_per_second == 0.5);
  CHECK(cfg.max_concurrent_probes == 4);
  CHECK(cfg.tls_key == "/k.pem");
  CHECK(cfg.location.name == "fra1");
  CHECK(cfg.location.source_address == "127.0.0.1");
}

TEST_CASE("agent config: errors carry file, line and column", "[agent][config]") {
  CHECK(agent_errors("") == "a.toml:1:1: missing required table [agent]");
  CHECK(agent_errors("[agent]\nlisten = \"localhost:1\"\ntoken_file = \"/t\"\n") ==
        "a.toml:2:10: agent.listen: 'localhost:1' must be \"ADDR:PORT\" with an IP address, "
        "e.g. \"192.0.2.7:9773\" or \"[::1]:9773\"");
  CHECK(agent_errors("[agent]\nlisten = \"127.0.0.1:1\"\n") ==
        "a.toml:1:1: missing required key 'token_file' in [agent]");
  CHECK(agent_errors("[agent]\nlisten = \"127.0.0.1:1\"\ntoken_file = \"t\"\n") ==
        "a.toml:3:14: agent.token_file: 't' must be an absolute path");
  CHECK(
      agent_errors("[agent]\nlisten = \"127.0.0.1:1\"\ntoken_file = \"/t\"\nalow_exec = true\n") ==
      "a.toml:4:1: unknown key 'alow_exec' in [agent] (did you mean 'allow_exec'?)");
  CHECK(agent_errors("[agent]\nlisten = \"127.0.0.1:1\"\ntoken_file = \"/t\"\n"
                     "tls_cert = \"/c\"\n") ==
        "a.toml:4:1: agent.tls_cert and agent.tls_key go together (both or neither)");
  CHECK(agent_errors("[agent]\nlisten = \"127.0.0.1:1\"\ntoken_file = \"/t\"\n"
                     "max_request_bytes = 10\n")
            .find("a.toml:4:21: agent.max_request_bytes") == 0);
}

TEST_CASE("config: agent locations", "[agent][config]") {
  auto cfg = fo::config::parse_config(
      "[[location]]\nname = \"here\"\nkind = \"local\"\n"
      "[[location]]\nname = \"fra1\"\nkind = \"agent\"\nurl = \"https://127.0.0.1:9773/\"\n"
      "token_file = \"/etc/failoverd/fra1.token\"\nca_file = \"/etc/failoverd/ca.pem\"\n"
      "tls_verify = false\ntimeout = \"3s\"\n" +
          kGroup,
      "t.toml");
  REQUIRE(cfg.locations.size() == 2);
  const auto& a = cfg.locations[1];
  CHECK(a.kind == fo::config::LocationKind::agent);
  CHECK(a.agent.url == "https://127.0.0.1:9773");
  CHECK(a.agent.token_file == "/etc/failoverd/fra1.token");
  CHECK(a.agent.ca_file == "/etc/failoverd/ca.pem");
  CHECK_FALSE(a.agent.tls_verify);
  CHECK(a.agent.timeout == std::chrono::seconds(3));
  CHECK(cfg.groups[0].locations == std::vector<std::string>{"here", "fra1"});

  const std::string head = "[[location]]\nname = \"a\"\nkind = \"agent\"\n";
  CHECK(config_errors(head + "token_file = \"/t\"\n" + kGroup) ==
        "t.toml:1:1: missing required key 'url' in [[location]]");
  CHECK(
      config_errors(head + "url = \"http://agent.example:9773\"\ntoken_file = \"/t\"\n" + kGroup) ==
      "t.toml:4:7: location.url: 'http://agent.example:9773' must name an IP address and a "
      "port 1..65535, e.g. \"http://192.0.2.7:9773\"");
  CHECK(config_errors(head + "url = \"http://127.0.0.1:9773/x\"\ntoken_file = \"/t\"\n" + kGroup) ==
        "t.toml:4:7: location.url: 'http://127.0.0.1:9773/x' must be scheme://IP:PORT only (no "
        "path, user or query)");
  CHECK(config_errors(head + "url = \"ftp://127.0.0.1:1\"\ntoken_file = \"/t\"\n" + kGroup) ==
        "t.toml:4:7: location.url: 'ftp://127.0.0.1:1' must start with http:// or https://");
  CHECK(config_errors(head +
                      "url = \"http://127.0.0.1:1\"\ntoken_file = \"/t\"\n"
                      "source_address = \"127.0.0.1\"\n" +
                      kGroup) ==
        "t.toml:6:1: location.source_address: only for kind = \"local\" (an agent probes from "
        "its own host)");
  CHECK(config_errors(head +
                      "url = \"http://127.0.0.1:1\"\ntoken_file = \"/t\"\n"
                      "ca_file = \"/ca.pem\"\n" +
                      kGroup) == "t.toml:6:1: location.ca_file: only for https:// agents");
  CHECK(config_errors("[[location]]\nname = \"x\"\nkind = \"satellite\"\n" + kGroup) ==
        "t.toml:3:8: location.kind: unsupported location kind 'satellite' (supported: local, "
        "agent)");
  CHECK(config_errors("[daemon]\nmax_concurrent_probes = 0\n" + kGroup)
            .find("t.toml:2:25: daemon.max_concurrent_probes") == 0);
}

TEST_CASE("wire: every probe kind survives the trip to the agent", "[agent][wire]") {
  auto cfg = fo::config::parse_config(
      "[[group]]\nname = \"shop\"\n[group.primary]\nprobes = [\n"
      " { kind = \"http\", name = \"web\", url = \"https://shop.example/health\", method = "
      "\"HEAD\", expect_status = \"200,204,300-302\", body_contains = \"ok\", body_regex = "
      "\"o+k\", headers = { X-Probe = \"1\" }, tls_verify = false, ca_file = \"/ca.pem\", "
      "client_cert = \"/c.pem\", client_key = \"/k.pem\", resolve = \"127.0.0.1\", max_body = "
      "1000, timeout = \"1500ms\", abortive_close = true },\n"
      " { kind = \"tcp\", address = \"[::1]:6379\", send = \"PING\\r\\n\", expect = \"PONG\", "
      "max_read = 100 },\n"
      " { kind = \"dns\", server = \"127.0.0.1:5353\", qname = \"www.example.org\", type = "
      "\"AAAA\", expect = \"2001:db8::1\" },\n"
      " { kind = \"postgres\", host = \"127.0.0.1\", port = 5433, dbname = \"app\", user = "
      "\"mon\", password_file = \"/pgpass\", role = \"standby\", max_lag = \"16MB\" },\n"
      " { kind = \"postgres\", name = \"pg2\", conninfo = \"host=/run/postgresql dbname=x\" },\n"
      " { kind = \"exec\", argv = [\"/bin/true\", \"a b\"], max_output = 10, timeout = \"2s\" "
      "} ]\n"
      "[group.secondary]\nprobes = [ { kind = \"tcp\", address = \"127.0.0.1:81\" } ]\n",
      "t.toml");
  std::vector<fo::probes::agent::WireProbe> sent;
  for (const auto& p : cfg.groups[0].primary.probes) sent.push_back({fo::core::Site::primary, p});
  const auto body =
      fo::probes::agent::make_request("shop", 7, std::chrono::seconds(4), sent).dump();
  fo::agent::RequestLimits limits;
  limits.allow_exec = true;
  const auto req = fo::agent::parse_probe_request(body, limits);
  INFO(req.error);
  REQUIRE(req.status == 200);
  CHECK(req.group == "shop");
  CHECK(req.round == 7);
  CHECK(req.deadline == std::chrono::seconds(4));
  REQUIRE(req.probes.size() == sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i) {
    const auto& a = sent[i].probe;
    const auto& b = req.probes[i].probe;
    INFO(a.name);
    CHECK(b.name == a.name);
    CHECK(b.kind == a.kind);
    CHECK(fo::probes::agent::probe_to_json(b) == fo::probes::agent::probe_to_json(a));
  }
  const auto& web = req.probes[0].probe.http;
  CHECK(web.expect_status.size() == 3);
  CHECK(web.headers.at("X-Probe") == "1");
  CHECK(web.timeout == std::chrono::milliseconds(1500));
  CHECK(req.probes[1].probe.tcp.send == "PING\r\n");
  CHECK(req.probes[2].probe.dns.expect == "2001:db8::1");
  CHECK(req.probes[3].probe.postgres.max_lag_bytes == 16u * 1024 * 1024);
  CHECK(req.probes[5].probe.exec.argv == std::vector<std::string>{"/bin/true", "a b"});
}

TEST_CASE("wire: requests are validated like the config", "[agent][wire]") {
  using fo::agent::parse_probe_request;
  fo::agent::RequestLimits limits;
  limits.max_probes = 2;
  auto req = [&](const std::string& probes) {
    return parse_probe_request(
        "{\"version\":1,\"group\":\"g\",\"round\":1,\"deadline_ms\":1000,\"probes\":" + probes +
            "}",
        limits);
  };
  CHECK(parse_probe_request("{", limits).error == "body is not valid JSON");
  CHECK(parse_probe_request("[]", limits).error == "body must be a JSON object");
  CHECK(parse_probe_request("{\"version\":2}", limits).error == "version must be 1");
  auto r =
      req("[{\"site\":\"primary\",\"probe\":{\"kind\":\"http\",\"name\":\"a\",\"url\":"
          "\"gopher://x\"}}]");
  CHECK(r.status == 400);
  CHECK(r.error.find("probes[0]: probe.url: 'gopher://x'") == 0);
  r =
      req("[{\"site\":\"primary\",\"probe\":{\"kind\":\"tcp\",\"name\":\"a\",\"address\":"
          "\"127.0.0.1:1\",\"colour\":\"red\"}}]");
  CHECK(r.error == "probes[0]: unknown key 'colour' in [probe]");
  r =
      req("[{\"site\":\"primary\",\"probe\":{\"kind\":\"exec\",\"name\":\"x\",\"argv\":[\"/bin/"
          "true\"]}}]");
  CHECK(r.status == 403);
  CHECK(r.error == "probes[0]: exec probes are not allowed on this agent (allow_exec = false)");
  r = req("[{\"site\":\"primary\",\"probe\":{\"kind\":\"tcp\",\"address\":\"127.0.0.1:1\"}}]");
  CHECK(r.error == "probes[0].probe.name: required in a request (results are matched by name)");
  r = req("[1,2,3]");
  CHECK(r.error == "too many probes (3, max 2)");
  r = req("[{\"site\":\"tertiary\",\"probe\":{}}]");
  CHECK(r.error == "probes[0].site: must be \"primary\" or \"secondary\"");
}

TEST_CASE("wire: replies are untrusted", "[agent][wire]") {
  using fo::probes::agent::parse_reply;
  fo::config::Probe p;
  p.name = "web";
  p.kind = "http";
  const std::vector<fo::probes::agent::WireProbe> asked{{fo::core::Site::primary, p},
                                                        {fo::core::Site::secondary, p}};
  auto ok =
      parse_reply(R"({"version":1,"round":5,"results":[{"site":"primary","probe":"web","ok":true,)"
                  R"("latency_ms":1.5,"error":""},{"site":"secondary","probe":"web","ok":false,)"
                  R"("latency_ms":3,"error":"tcp: connection\nrefused"}]})",
                  5, asked);
  REQUIRE(ok.ok);
  REQUIRE(ok.results.size() == 2);
  CHECK(ok.results[0].result.ok);
  CHECK(ok.results[1].result.error == "tcp: connection refused");
  // Fewer results than asked is fine: the others are missing.
  CHECK(parse_reply(R"({"version":1,"round":5,"results":[]})", 5, asked).ok);
  for (
      const char* bad : {
          "garbage",
          "[]",
          R"({"version":1,"round":4,"results":[]})",
          R"({"version":2,"round":5,"results":[]})",
          R"({"version":1,"round":5,"results":{}})",
          R"({"version":1,"round":5,"results":[{"site":"primary","probe":"db","ok":true,"latency_ms":1}]})",
          R"({"version":1,"round":5,"results":[{"site":"primary","probe":"web","ok":"yes","latency_ms":1}]})",
          R"({"version":1,"round":5,"results":[{"site":"primary","probe":"web","ok":true,"latency_ms":-1}]})",
          R"({"version":1,"round":5,"results":[{"site":"primary","probe":"web","ok":true,"latency_ms":1},{"site":"primary","probe":"web","ok":true,"latency_ms":1}]})",
          R"({"version":1,"round":5,"results":[[[[[[[[[[[[1]]]]]]]]]]]]})",
      }) {
    INFO(bad);
    const auto r = parse_reply(bad, 5, asked);
    CHECK_FALSE(r.ok);
    CHECK(r.results.empty());
    CHECK(r.error.rfind("reply: ", 0) == 0);
  }
}
