// Config loader: successful loads, defaults and dependent defaults, file access errors.
#include <stdlib.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "config_test_util.hpp"
#include "daemon/config/config.hpp"

using namespace std::chrono_literals;
using fo::config::ConfigException;
using fo::config::load_config_file;
using fo::config::parse_config;
using fo::config::test::errors_of;
using fo::config::test::kMinimal;
using Phase = fo::core::Phase;

namespace {

// A private temp dir, removed with everything in it at scope exit.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/fo-config-test-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string write(const std::string& name, std::string_view content) const {
    std::string file = path + "/" + name;
    std::ofstream(file, std::ios::binary) << content;
    return file;
  }
};

}  // namespace

TEST_CASE("example file etc/failoverd.toml loads", "[config]") {
  auto cfg = load_config_file(FO_EXAMPLE_CONFIG);
  CHECK(cfg.source == FO_EXAMPLE_CONFIG);
  CHECK(cfg.daemon.state_db == "/var/lib/failoverd/state.db");
  CHECK(cfg.daemon.control_socket == "/run/failoverd/control.sock");
  CHECK(cfg.daemon.log_level == "info");
  CHECK(cfg.daemon.store_queue_limit == 10000);
  REQUIRE(cfg.locations.size() == 2);
  CHECK(cfg.locations[0].name == "ams");
  CHECK(cfg.locations[0].interface == "eth0");
  CHECK(cfg.locations[1].name == "fra");
  CHECK(cfg.locations[1].source_address.empty());
  REQUIRE(cfg.groups.size() == 1);
  const auto* shop = cfg.find_group("shop");
  REQUIRE(shop != nullptr);
  CHECK(shop->locations == std::vector<std::string>{"ams", "fra"});
  REQUIRE(shop->primary.probes.size() == 2);
  CHECK(shop->primary.probes[0].name == "front");
  CHECK(shop->primary.probes[0].http.url == "https://192.0.2.10/health");
  CHECK(shop->primary.probes[1].http.method == "HEAD");
  CHECK(shop->primary.probes[1].http.timeout == 3s);
  REQUIRE(shop->primary.probes[1].http.expect_status.size() == 2);
  CHECK(shop->primary.probes[1].http.expect_status[0].lo == 200);
  CHECK(shop->primary.probes[1].http.expect_status[0].hi == 200);
  CHECK(shop->primary.probes[1].http.expect_status[1].lo == 204);
  REQUIRE(shop->secondary.probes.size() == 2);
  const auto& checkout = shop->secondary.probes[1].http;
  CHECK(checkout.body_contains == "OK");
  CHECK(checkout.headers.at("Host") == "shop.example.com");
  CHECK(checkout.headers.at("X-Probe") == "failoverd");
  CHECK(checkout.ca_file == "/etc/failoverd/shop-ca.pem");
  CHECK(checkout.tls_verify);
  CHECK(checkout.max_body == 65536);
  CHECK(checkout.expect_status.size() == 1);
  CHECK(checkout.expect_status[0].hi == 299);

  const auto& p = shop->policy;
  CHECK(p.interval == 10s);
  CHECK(p.warm_below == 1.0);
  CHECK(p.cool_after == 30min);
  CHECK(p.failover_below == 0.5);
  CHECK(p.failover_after == 3);
  CHECK(p.secondary_min == 0.5);
  CHECK(p.failback == fo::core::FailbackMode::automatic);
  CHECK(p.failback_above == 1.0);
  CHECK(p.failback_stable == 45min);
  CHECK(p.min_dwell == 10min);
  CHECK(p.flap_limit == 3);
  CHECK(p.flap_window == 1h);
  CHECK(p.degraded_interval == 10s);
  CHECK(p.stale_after == 20s);
  CHECK(p.min_locations == 2);
  CHECK(p.require == fo::core::Require::all);

  REQUIRE(shop->steps_for(Phase::warm).size() == 1);
  CHECK(shop->steps_for(Phase::warm)[0].retries == 2);
  CHECK(shop->steps_for(Phase::warm)[0].timeout == 2min);
  REQUIRE(shop->steps_for(Phase::failover).size() == 2);
  CHECK(shop->steps_for(Phase::failover)[0].env.at("PGDATA") == "/var/lib/postgresql/15/main");
  CHECK(shop->steps_for(Phase::failover)[1].argv ==
        std::vector<std::string>{"/usr/local/sbin/shop-switch-dns", "secondary"});
  REQUIRE(shop->steps_for(Phase::failback).size() == 1);
  REQUIRE(shop->steps_for(Phase::cool).size() == 1);
  CHECK_FALSE(shop->steps_for(Phase::cool)[0].abort_on_failure);
  for (const auto& steps : shop->steps)
    for (const auto& s : steps) CHECK(s.argv.at(0).rfind("/usr/local/sbin/", 0) == 0);
}

TEST_CASE("minimal config gets documented defaults", "[config]") {
  auto cfg = parse_config(kMinimal, "min.toml");
  CHECK(cfg.source == "min.toml");
  CHECK(cfg.daemon.state_db == "/var/lib/failoverd/state.db");
  CHECK(cfg.daemon.log_level == "info");
  REQUIRE(cfg.locations.size() == 1);
  CHECK(cfg.locations[0].name == "local");
  CHECK(cfg.locations[0].kind == fo::config::LocationKind::local);
  CHECK(cfg.find_location("local") == &cfg.locations[0]);
  CHECK(cfg.find_location("ams") == nullptr);
  REQUIRE(cfg.groups.size() == 1);
  const auto& g = cfg.groups[0];
  CHECK(cfg.find_group("shop") == &g);
  CHECK(cfg.find_group("nope") == nullptr);
  CHECK(g.locations == std::vector<std::string>{"local"});
  CHECK(g.pos.line == 1);
  REQUIRE(g.primary.probes.size() == 1);
  const auto& probe = g.primary.probes[0];
  CHECK(probe.name == "http#0");
  CHECK(probe.kind == "http");
  CHECK(probe.pos.line == 4);
  CHECK(probe.http.method == "GET");
  REQUIRE(probe.http.expect_status.size() == 1);
  CHECK(probe.http.expect_status[0].lo == 200);
  CHECK(probe.http.expect_status[0].hi == 399);
  CHECK(probe.http.timeout == 5s);
  CHECK(probe.http.tls_verify);
  CHECK(probe.http.max_body == 65536);
  CHECK_FALSE(probe.http.abortive_close);
  CHECK(probe.http.headers.empty());
  for (const auto& steps : g.steps) CHECK(steps.empty());
  const auto& p = g.policy;
  CHECK(p.interval == 10s);
  CHECK(p.degraded_interval == 10s);
  CHECK(p.stale_after == 20s);
  CHECK(p.failback_above == p.warm_below);
  CHECK(p.min_locations == 1);
  CHECK(p.failover_after == 3);
  CHECK(p.require == fo::core::Require::all);
}

TEST_CASE("dependent policy defaults follow interval, warm_below and locations", "[config]") {
  auto cfg = parse_config(R"([[location]]
name = "a"
kind = "local"
[[location]]
name = "b"
kind = "local"
source_address = "2001:db8::1"
[[location]]
name = "c"
kind = "local"
source_address = "192.0.2.1"
[[location]]
name = "d"
kind = "local"
[[group]]
name = "shop"
interval = "30s"
[group.policy]
warm_below = 0.9
[group.primary]
probes = [ { kind = "http", url = "https://192.0.2.10/health" } ]
[group.secondary]
probes = [ { kind = "http", url = "https://198.51.100.20/health" } ]
[[group]]
name = "blog"
interval = "250ms"
locations = ["a", "c"]
[group.primary]
probes = [ { kind = "http", url = "http://192.0.2.10/", timeout = "200ms" } ]
[group.secondary]
probes = [ { kind = "http", url = "http://198.51.100.20/", timeout = "250ms" } ]
)",
                          "dep.toml");
  REQUIRE(cfg.groups.size() == 2);
  const auto& shop = cfg.groups[0].policy;
  CHECK(shop.interval == 30s);
  CHECK(shop.degraded_interval == 30s);
  CHECK(shop.stale_after == 60s);
  CHECK(shop.failback_above == 0.9);
  CHECK(shop.min_locations == 3);  // 4 locations -> 4/2+1
  const auto& blog = cfg.groups[1].policy;
  CHECK(cfg.groups[1].locations == std::vector<std::string>{"a", "c"});
  CHECK(blog.interval == 250ms);
  CHECK(blog.stale_after == 500ms);
  CHECK(blog.min_locations == 2);  // 2 locations -> 2/2+1
  CHECK(cfg.find_location("b")->source_address == "2001:db8::1");
}

TEST_CASE("integers are accepted where floats are expected", "[config]") {
  std::string text(kMinimal);
  text += "[group.policy]\nwarm_below = 1\nfailover_below = 0\nfailback_above = 1\n";
  auto cfg = parse_config(text, "t.toml");
  CHECK(cfg.groups[0].policy.warm_below == 1.0);
  CHECK(cfg.groups[0].policy.failover_below == 0.0);
}

TEST_CASE("policy and step values are mapped", "[config]") {
  std::string text(kMinimal);
  text += R"([group.policy]
failback = "manual"
require = "any"
min_locations = 1
degraded_interval = "2s"
stale_after = "1m"
[[group.failover]]
kind = "exec"
argv = ["/bin/true"]
on_failure = "continue"
retries = 10
timeout = "1ms"
[[group.failover]]
kind = "exec"
argv = ["/bin/false", "x"]
)";
  auto cfg = parse_config(text, "t.toml");
  const auto& g = cfg.groups[0];
  CHECK(g.policy.failback == fo::core::FailbackMode::manual);
  CHECK(g.policy.require == fo::core::Require::any);
  CHECK(g.policy.degraded_interval == 2s);
  CHECK(g.policy.stale_after == 1min);
  const auto& steps = g.steps_for(Phase::failover);
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].name == "exec#0");
  CHECK(steps[1].name == "exec#1");
  CHECK(steps[0].kind == "exec");
  CHECK_FALSE(steps[0].abort_on_failure);
  CHECK(steps[1].abort_on_failure);
  CHECK(steps[0].retries == 10);
  CHECK(steps[0].timeout == 1ms);
  CHECK(steps[1].timeout == 60s);
  CHECK(steps[1].pos.line == 19);
}

TEST_CASE("load_config_file reads files and reports OS errors at file:1:1", "[config]") {
  TempDir dir;
  std::string good = dir.write("good.toml", kMinimal);
  CHECK(load_config_file(good).groups.size() == 1);

  std::string missing = dir.path + "/missing.toml";
  try {
    (void)load_config_file(missing);
    FAIL("no exception");
  } catch (const ConfigException& e) {
    CHECK(std::string(e.what()) ==
          missing + ":1:1: cannot open config file: No such file or directory");
    REQUIRE(e.errors().size() == 1);
    CHECK(e.errors()[0].pos.file == missing);
  }
  try {
    (void)load_config_file(dir.path);
    FAIL("no exception");
  } catch (const ConfigException& e) {
    CHECK(std::string(e.what()) == dir.path + ":1:1: cannot read config file: Is a directory");
  }
  std::string big = dir.write("big.toml", std::string(2 << 20, '#'));
  try {
    (void)load_config_file(big);
    FAIL("no exception");
  } catch (const ConfigException& e) {
    CHECK(std::string(e.what()) ==
          big + ":1:1: config file is too large (more than 1048576 bytes)");
  }
  // Errors name the file exactly as given, relative paths included.
  std::string bad = dir.write("bad.toml", "x = 1\n");
  REQUIRE(chdir(dir.path.c_str()) == 0);
  try {
    (void)load_config_file("./bad.toml");
    FAIL("no exception");
  } catch (const ConfigException& e) {
    CHECK(std::string(e.what()).rfind("./bad.toml:1:1: unknown key 'x' at the top level", 0) == 0);
  }
  REQUIRE(chdir("/") == 0);
}

TEST_CASE("ConfigError::to_string is file:line:column: message", "[config]") {
  fo::config::ConfigError e{{"a.toml", 3, 7}, "boom"};
  CHECK(e.to_string() == "a.toml:3:7: boom");
  ConfigException ex({e, {{"b.toml", 1, 1}, "bang"}});
  CHECK(std::string(ex.what()) == "a.toml:3:7: boom\nb.toml:1:1: bang");
  CHECK(ex.errors().size() == 2);
}

TEST_CASE("errors_of helper sees a valid config as OK", "[config]") {
  CHECK(errors_of(kMinimal) == "OK");
}
