// Config keys of the dns step: values, defaults, and errors with file:line:column.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "daemon/config/config.hpp"

using namespace std::chrono_literals;
using fo::config::ConfigException;
using fo::config::parse_config;

namespace {

// Lines 1-6; the step table starts on line 7 ("[[group.failover]]"), its keys on line 8.
const std::string kHead = R"([[group]]
name = "shop"
[group.primary]
probes = [ { kind = "http", url = "https://192.0.2.10/health" } ]
[group.secondary]
probes = [ { kind = "http", url = "https://198.51.100.20/health" } ]
[[group.failover]]
kind = "dns"
)";

std::string errors_of(const std::string& step_keys) {
  try {
    (void)parse_config(kHead + step_keys, "t.toml");
  } catch (const ConfigException& e) {
    return e.what();
  }
  return "OK";
}

const fo::config::DnsStep& dns_of(const fo::config::Config& cfg) {
  return cfg.groups.at(0).steps_for(fo::core::Phase::failover).at(0).dns;
}

}  // namespace

TEST_CASE("dns step keys load with their defaults", "[dns][config]") {
  auto cfg = parse_config(kHead + R"(zone = "Failover.Test"
record = "WWW"
primary = ["192.0.2.10"]
secondary = ["198.51.100.21", "198.51.100.20"]
server = "127.0.0.1:5300"
tsig_key_file = "/etc/failoverd/feas.key"
)",
                          "t.toml");
  const auto& d = dns_of(cfg);
  CHECK(d.provider == "rfc2136");
  CHECK(d.zone == "failover.test.");
  CHECK(d.record == "www.failover.test.");
  CHECK(d.type == "A");
  CHECK(d.ttl == 60);
  CHECK(d.primary == std::vector<std::string>{"192.0.2.10"});
  CHECK(d.secondary == std::vector<std::string>{"198.51.100.20", "198.51.100.21"});
  CHECK(d.server.host == "127.0.0.1");
  CHECK(d.server.port == 5300);
  CHECK(d.tsig);
  REQUIRE(d.verify.size() == 1);  // defaults to the update server
  CHECK(d.verify[0].port == 5300);
  CHECK(d.verify_interval == 200ms);

  auto aaaa = parse_config(kHead + R"(zone = "failover.test."
record = "@"
type = "AAAA"
ttl = 300
primary = ["2001:DB8:0::1"]
secondary = ["2001:db8::2"]
server = "[::1]:53"
tsig = false
verify = ["[::1]", "127.0.0.1:5301"]
verify_interval = "1s"
)",
                           "t.toml");
  const auto& a = dns_of(aaaa);
  CHECK(a.record == "failover.test.");
  CHECK(a.primary == std::vector<std::string>{"2001:db8::1"});
  CHECK_FALSE(a.tsig);
  REQUIRE(a.verify.size() == 2);
  CHECK(a.verify[0].host == "::1");
  CHECK(a.verify[0].port == 53);
  CHECK(a.verify_interval == 1000ms);

  auto pdns = parse_config(kHead + R"(provider = "powerdns"
zone = "failover.test"
record = "alias.failover.test."
type = "CNAME"
primary = ["www.failover.test"]
secondary = ["www2.failover.test."]
api_url = "http://127.0.0.1:8081/"
api_key_file = "/etc/failoverd/pdns.key"
verify = ["127.0.0.1:5300"]
)",
                           "t.toml");
  const auto& p = dns_of(pdns);
  CHECK(p.provider == "powerdns");
  CHECK(p.record == "alias.failover.test.");
  CHECK(p.primary == std::vector<std::string>{"www.failover.test."});
  CHECK(p.api_url == "http://127.0.0.1:8081");
  CHECK(p.server_id == "localhost");
}

TEST_CASE("dns step errors name file line and column", "[dns][config]") {
  const std::string base = R"(zone = "failover.test"
record = "www"
primary = ["192.0.2.10"]
secondary = ["198.51.100.20"]
server = "127.0.0.1:5300"
tsig_key_file = "/k"
)";
  REQUIRE(errors_of(base) == "OK");
  auto with = [&](const std::string& key, const std::string& line) {
    std::istringstream in(base);
    std::string out;
    for (std::string l; std::getline(in, l);)
      if (l.rfind(key + " =", 0) != 0) out += l + "\n";
    return errors_of(out + line + "\n");
  };
  // The replaced key is the last line: line 14.
  CHECK_THAT(with("secondary", R"(secondary = ["198.51.100.20", "300.1.1.1"])"),
             Catch::Contains("t.toml:14:31: group.failover.secondary[1]: '300.1.1.1' is not an "
                             "IPv4 address"));
  CHECK_THAT(with("zone", "ttl = 0"), Catch::Contains("t.toml:14:7: group.failover.ttl"));
  CHECK_THAT(with("server", R"(server = "ns1.example:53")"),
             Catch::Contains("t.toml:14:10: group.failover.server: 'ns1.example:53' must be"));
  CHECK_THAT(with("record", R"(record = "www.other.test.")"),
             Catch::Contains("t.toml:14:10: group.failover.record: 'www.other.test.' is not "
                             "inside zone 'failover.test.'"));
  CHECK_THAT(with("tsig_key_file", ""), Catch::Contains("missing required key 'tsig_key_file'"));
  CHECK_THAT(with("tsig_key_file", "tsig = false\ntsig_key_file = \"/k\""),
             Catch::Contains("t.toml:15:1: group.failover.tsig_key_file: conflicts with tsig"));
  CHECK_THAT(with("zone", R"(api_url = "http://127.0.0.1:8081")"),
             Catch::Contains("t.toml:14:1: group.failover.api_url: only for provider = "
                             "\"powerdns\""));
  CHECK_THAT(with("zone", R"(verify = ["127.0.0.1:53", "127.0.0.1"])"),
             Catch::Contains("is listed twice"));
  CHECK_THAT(with("zone", R"(verify_interval = "1ms")"),
             Catch::Contains("t.toml:14:19: group.failover.verify_interval"));
  CHECK_THAT(with("zone", R"(type = "MX")"), Catch::Contains("t.toml:14:8: group.failover.type"));
  CHECK_THAT(with("zone", R"(tsig_keyfile = "/k")"), Catch::Contains("t.toml:14:1:"));
  CHECK_THAT(errors_of(R"(provider = "powerdns"
zone = "failover.test"
record = "www"
type = "CNAME"
primary = ["a.test", "b.test"]
secondary = ["b.test"]
api_url = "http://pdns.example:8081/api"
api_key_file = "/k"
)"),
             Catch::Contains("t.toml:13:11: group.failover.primary: must have 1..1 values") &&
                 Catch::Contains("t.toml:15:11: group.failover.api_url") &&
                 Catch::Contains("missing required key 'verify'"));
}

TEST_CASE("example etc/examples/steps-dns.toml loads", "[dns][config]") {
  std::ifstream in(FO_DNS_EXAMPLE);
  std::stringstream text;
  text << in.rdbuf();
  REQUIRE_FALSE(text.str().empty());
  auto cfg = parse_config(text.str(), FO_DNS_EXAMPLE);
  REQUIRE(cfg.groups.size() == 1);
  CHECK(cfg.groups[0].steps_for(fo::core::Phase::failover).size() == 2);
  CHECK(cfg.groups[0].steps_for(fo::core::Phase::failback).size() == 2);
}
