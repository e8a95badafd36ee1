// Config loader: every error category reports the exact file:line:column and message.
#include <catch2/catch.hpp>

#include <string>

#include "config_test_util.hpp"
#include "daemon/config/config.hpp"

using fo::config::ConfigException;
using fo::config::parse_config;
using fo::config::test::errors_of;
using fo::config::test::kMinimal;

namespace {

// kMinimal plus lines appended inside the last table ([group.secondary]) area, i.e. from
// line 7 on.
std::string minimal_plus(std::string_view tail) {
  return std::string(kMinimal) + std::string(tail);
}

// kMinimalLong plus lines from line 8 on; appended probe tables extend the secondary's probes.
std::string long_plus(std::string_view tail) {
  return std::string(fo::config::test::kMinimalLong) + std::string(tail);
}

// A group whose line 3 is free for one extra key; the rest is valid.
std::string group_with(std::string_view line3) {
  return "[[group]]\nname = \"shop\"\n" + std::string(line3) +
         "\n[group.primary]\n"
         "probes = [ { kind = \"http\", url = \"https://192.0.2.10/health\" } ]\n"
         "[group.secondary]\n"
         "probes = [ { kind = \"http\", url = \"https://198.51.100.20/health\" } ]\n";
}

}  // namespace

TEST_CASE("TOML syntax error is reported at its position", "[config][errors]") {
  CHECK(errors_of("[[group]]\nname = \n", "syn.toml") ==
        "syn.toml:2:8: Error while parsing key-value pair: expected value, saw '\\n'");
  CHECK(errors_of("[daemon]\nlog_level = \"info\"\nlog_level = \"debug\"\n", "dup.toml") ==
        "dup.toml:3:13: Error while parsing key-value pair: cannot redefine existing string "
        "'log_level'");
}

TEST_CASE("unknown keys are reported at the key with a suggestion", "[config][errors]") {
  SECTION("top level") {
    CHECK(errors_of("groups = 1\n" + std::string(kMinimal)) ==
          "t.toml:1:1: unknown key 'groups' at the top level (did you mean 'group'?)");
  }
  SECTION("daemon") {
    CHECK(errors_of("[daemon]\n  log_levle = \"info\"\n" + std::string(kMinimal)) ==
          "t.toml:2:3: unknown key 'log_levle' in [daemon] (did you mean 'log_level'?)");
  }
  SECTION("group") {
    CHECK(errors_of(group_with("intervl = \"10s\"")) ==
          "t.toml:3:1: unknown key 'intervl' in [[group]] (did you mean 'interval'?)");
  }
  SECTION("group, nothing close") {
    CHECK(errors_of(group_with("colour = \"blue\"")) ==
          "t.toml:3:1: unknown key 'colour' in [[group]]");
  }
  SECTION("policy") {
    CHECK(errors_of(minimal_plus("[group.policy]\nfailover_below = 0.4\n  warm_belw = 0.9\n")) ==
          "t.toml:9:3: unknown key 'warm_belw' in [group.policy] (did you mean 'warm_below'?)");
  }
  SECTION("probe inline table") {
    CHECK(errors_of(
              "[[group]]\nname = \"shop\"\n[group.primary]\n"
              "probes = [ { kind = \"http\", url = \"https://192.0.2.10/\", timout = \"1s\" } ]\n"
              "[group.secondary]\n"
              "probes = [ { kind = \"http\", url = \"https://198.51.100.20/\" } ]\n") ==
          "t.toml:4:58: unknown key 'timout' in [group.primary.probes] (did you mean 'timeout'?)");
  }
  SECTION("step") {
    CHECK(errors_of(minimal_plus("[[group.cool]]\nkind = \"exec\"\nargv = [\"/bin/true\"]\n"
                                 "retrys = 2\n")) ==
          "t.toml:10:1: unknown key 'retrys' in [[group.cool]] (did you mean 'retries'?)");
  }
  SECTION("location") {
    CHECK(errors_of("[[location]]\nname = \"a\"\nkind = \"local\"\niface = \"eth0\"\n" +
                    std::string(kMinimal)) == "t.toml:4:1: unknown key 'iface' in [[location]]");
  }
}

TEST_CASE("wrong types are reported at the value", "[config][errors]") {
  CHECK(errors_of(group_with("interval = 10")) ==
        "t.toml:3:12: group.interval: expected a duration string like \"10s\", got integer");
  CHECK(errors_of(group_with("locations = \"local\"")) ==
        "t.toml:3:13: group.locations: expected an array of location names, got string");
  CHECK(errors_of("[daemon]\nstore_queue_limit = \"10000\"\n" + std::string(kMinimal)) ==
        "t.toml:2:21: daemon.store_queue_limit: expected an integer, got string");
  CHECK(errors_of(minimal_plus("[group.policy]\nwarm_below = \"high\"\n")) ==
        "t.toml:8:14: policy.warm_below: expected a number, got string");
  CHECK(errors_of(minimal_plus("[group.policy]\nflap_limit = 2.5\n")) ==
        "t.toml:8:14: policy.flap_limit: expected an integer, got float");
  CHECK(errors_of("daemon = 1\n" + std::string(kMinimal)) ==
        "t.toml:1:10: daemon: expected a table ([daemon]), got integer");
  CHECK(errors_of("[group]\nname = \"x\"\n") ==
        "t.toml:1:1: group: expected an array of tables ([[group]]), got table");
  CHECK(errors_of(minimal_plus("[[group.warm]]\nkind = \"exec\"\nargv = \"/bin/true\"\n")) ==
        "t.toml:9:8: group.warm.argv: expected an array of strings, got string");
}

TEST_CASE("bad durations are reported at the value", "[config][errors]") {
  CHECK(errors_of(group_with("interval = \"10x\"")) ==
        "t.toml:3:12: group.interval: invalid duration '10x' (expected e.g. \"250ms\", \"10s\", "
        "\"45m\", \"1h30m\")");
  CHECK(errors_of(minimal_plus("[group.policy]\ncool_after = \"\"\n")) ==
        "t.toml:8:14: policy.cool_after: invalid duration '' (expected e.g. \"250ms\", \"10s\", "
        "\"45m\", \"1h30m\")");
}

TEST_CASE("out-of-range values are reported at the value", "[config][errors]") {
  CHECK(errors_of(group_with("interval = \"50ms\"")) ==
        "t.toml:3:12: group.interval: 50ms is out of range (100ms..1h)");
  CHECK(errors_of("[daemon]\nstore_queue_limit = 5\n" + std::string(kMinimal)) ==
        "t.toml:2:21: daemon.store_queue_limit: 5 is out of range (100..1000000)");
  CHECK(errors_of(minimal_plus("[group.policy]\nwarm_below = 1.5\n")) ==
        "t.toml:8:14: policy.warm_below: 1.5 is out of range (0..1)");
  CHECK(errors_of(minimal_plus("[group.policy]\nsecondary_min = 0\n")) ==
        "t.toml:8:17: policy.secondary_min: 0 is out of range (greater than 0 and at most 1)");
  CHECK(errors_of(minimal_plus("[group.policy]\nwarm_below = nan\n")) ==
        "t.toml:8:14: policy.warm_below: nan is out of range (0..1)");
  CHECK(errors_of(minimal_plus("[group.policy]\nmin_locations = 2\n")) ==
        "t.toml:8:17: policy.min_locations: 2 is more than the group's 1 location(s)");
  CHECK(errors_of(minimal_plus("[group.policy]\ndegraded_interval = \"20s\"\n")) ==
        "t.toml:8:1: policy.degraded_interval (20s) must not exceed the group interval (10s)");
  CHECK(errors_of(minimal_plus("[group.policy]\nstale_after = \"5s\"\n")) ==
        "t.toml:8:1: policy.stale_after (5s) must be at least the group interval (10s)");
  CHECK(errors_of(minimal_plus("[[group.warm]]\nkind = \"exec\"\nargv = [\"/bin/true\"]\n"
                               "retries = 11\n")) ==
        "t.toml:10:11: group.warm.retries: 11 is out of range (0..10)");
  CHECK(errors_of(long_plus("[[group.secondary.probes]]\nkind = \"http\"\n"
                            "url = \"https://198.51.100.20/\"\nmax_body = 0\n")) ==
        "t.toml:11:12: group.secondary.probes.max_body: 0 is out of range (1..16777216)");
}

TEST_CASE("probe timeout must not exceed the group interval", "[config][errors]") {
  CHECK(errors_of(group_with("interval = \"1s\"")) ==
        "t.toml:5:12: group.primary.probes.timeout (5s, the default) must not exceed the group "
        "interval (1s)\n"
        "t.toml:7:12: group.secondary.probes.timeout (5s, the default) must not exceed the group "
        "interval (1s)");
  CHECK(errors_of(long_plus("[[group.secondary.probes]]\nkind = \"http\"\n"
                            "url = \"https://198.51.100.20/\"\ntimeout = \"11s\"\n")) ==
        "t.toml:11:1: group.secondary.probes.timeout (11s) must not exceed the group interval "
        "(10s)");
}

TEST_CASE("durations in messages are exact, never rounded", "[config][errors]") {
  CHECK(errors_of(long_plus("timeout = \"60500ms\"\n")) ==
        "t.toml:8:11: group.secondary.probes.timeout: 60500ms is out of range (10ms..1m)");
  CHECK(errors_of(minimal_plus("[group.policy]\ndegraded_interval = \"10001ms\"\n")) ==
        "t.toml:8:1: policy.degraded_interval (10001ms) must not exceed the group interval "
        "(10s)");
}

TEST_CASE("failover_below must be below warm_below, at the offending key", "[config][errors]") {
  CHECK(errors_of(minimal_plus("[group.policy]\nwarm_below = 0.8\nfailover_below = 0.9\n")) ==
        "t.toml:9:1: policy.failover_below (0.9) must be below warm_below (0.8)");
  CHECK(errors_of(minimal_plus("[group.policy]\nfailover_below = 0.5\nwarm_below = 0.5\n")) ==
        "t.toml:8:1: policy.failover_below (0.5) must be below warm_below (0.5)");
  // Only warm_below written: the default failover_below (0.5) conflicts with it.
  CHECK(errors_of(minimal_plus("[group.policy]\n  warm_below = 0.4\n")) ==
        "t.toml:8:3: policy.failover_below (0.5) must be below warm_below (0.4)");
  CHECK(errors_of(minimal_plus("[group.policy]\nfailback_above = 0.3\n")) ==
        "t.toml:8:1: policy.failback_above (0.3) must be above failover_below (0.5)");
}

TEST_CASE("duplicate names are reported at the second definition", "[config][errors]") {
  SECTION("group") {
    std::string text = std::string(kMinimal) + std::string(kMinimal);
    CHECK(errors_of(text) == "t.toml:8:8: duplicate group name 'shop' (first defined at line 1)");
  }
  SECTION("location") {
    CHECK(errors_of("[[location]]\nname = \"ams\"\nkind = \"local\"\n"
                    "[[location]]\nname = \"ams\"\nkind = \"local\"\n" +
                    std::string(kMinimal)) ==
          "t.toml:5:8: duplicate location name 'ams' (first defined at line 1)");
  }
  SECTION("probe") {
    CHECK(errors_of(long_plus("name = \"front\"\n[[group.secondary.probes]]\nkind = \"http\"\n"
                              "name = \"front\"\nurl = \"https://198.51.100.20/\"\n")) ==
          "t.toml:11:8: duplicate probe name 'front' (first defined at line 5)");
    // '#' is not allowed in explicit names, so defaults ("http#0") can never collide.
    CHECK(errors_of(long_plus("name = \"http#1\"\n")) ==
          "t.toml:8:8: group.secondary.probes.name: 'http#1' must be 1..64 characters of A-Z a-z "
          "0-9 _ . -");
    // Names are unique per site; the same name on both sites is fine.
    CHECK(errors_of(
              "[[group]]\nname = \"shop\"\n[group.primary]\n"
              "probes = [ { kind = \"http\", name = \"front\", url = \"https://192.0.2.10/\" } ]\n"
              "[group.secondary]\n"
              "probes = [ { kind = \"http\", name = \"front\", url = \"https://198.51.100.20/\" } "
              "]\n") == "OK");
  }
  SECTION("step") {
    CHECK(errors_of(minimal_plus("[[group.warm]]\nkind = \"exec\"\nname = \"a\"\nargv = [\"/x\"]\n"
                                 "[[group.warm]]\nkind = \"exec\"\nname = \"a\"\n"
                                 "argv = [\"/y\"]\n")) ==
          "t.toml:13:8: duplicate step name 'a' (first defined at line 7)");
  }
}

TEST_CASE("references to unknown locations are errors", "[config][errors]") {
  CHECK(errors_of(group_with("locations = [\"local\", \"fra\"]")) ==
        "t.toml:3:23: group.locations: unknown location 'fra' (defined: local)");
  CHECK(errors_of(group_with("locations = [\"local\", \"local\"]")) ==
        "t.toml:3:23: group.locations: location 'local' is listed twice");
  CHECK(errors_of(group_with("locations = []")) ==
        "t.toml:3:13: group.locations: must name at least one location (omit it to use all)");
}

TEST_CASE("unsupported kinds list the supported ones", "[config][errors]") {
  CHECK(errors_of("[[group]]\nname = \"shop\"\n[group.primary]\n"
                  "probes = [ { kind = \"smtp\", address = \"192.0.2.10:25\" } ]\n"
                  "[group.secondary]\n"
                  "probes = [ { kind = \"http\", url = \"https://198.51.100.20/\" } ]\n") ==
        "t.toml:4:21: group.primary.probes.kind: unsupported probe kind 'smtp' (supported: http, "
        "tcp, dns, postgres, exec)");
  CHECK(errors_of(minimal_plus("[[group.failover]]\nkind = \"smtp\"\n")) ==
        "t.toml:8:8: group.failover.kind: unsupported step kind 'smtp' (supported: exec, check, "
        "dns, postgres, systemd, webhook)");
  CHECK(errors_of("[[location]]\nname = \"x\"\nkind = \"ftp\"\n" + std::string(kMinimal)) ==
        "t.toml:3:8: location.kind: unsupported location kind 'ftp' (supported: local, agent)");
}

TEST_CASE("exec steps: absolute argv[0] and no reserved env names", "[config][errors]") {
  CHECK(errors_of(minimal_plus("[[group.failback]]\nkind = \"exec\"\n"
                               "argv = [\"scripts/failback.sh\", \"now\"]\n")) ==
        "t.toml:9:9: group.failback.argv[0]: 'scripts/failback.sh' must be an absolute path "
        "(no shell, no PATH lookup)");
  CHECK(errors_of(minimal_plus("[[group.failover]]\nkind = \"exec\"\nargv = [\"/x\"]\n"
                               "env = { OK_NAME = \"1\", FAILOVER_GROUP = \"x\" }\n")) ==
        "t.toml:10:24: group.failover.env: 'FAILOVER_GROUP' is reserved: names starting with "
        "FAILOVER_ are set by failoverd");
  CHECK(errors_of(minimal_plus("[[group.failover]]\nkind = \"exec\"\nargv = [\"/x\"]\n"
                               "env = { lower = \"1\" }\n")) ==
        "t.toml:10:9: group.failover.env: 'lower' is not a valid environment variable name "
        "([A-Z_][A-Z0-9_]*)");
  CHECK(errors_of(minimal_plus("[[group.failover]]\nkind = \"exec\"\nargv = []\n")) ==
        "t.toml:9:8: group.failover.argv: must have 1..64 elements, has 0");
  CHECK(errors_of(minimal_plus("[[group.failover]]\nkind = \"exec\"\n")) ==
        "t.toml:7:1: missing required key 'argv' in [[group.failover]]");
}

TEST_CASE("probe values are validated", "[config][errors]") {
  auto probe = [](std::string_view keys) {
    return long_plus("[[group.secondary.probes]]\nkind = \"http\"\n" + std::string(keys) + "\n");
  };
  CHECK(errors_of(probe("url = \"ftp://198.51.100.20/\"")) ==
        "t.toml:10:7: group.secondary.probes.url: 'ftp://198.51.100.20/' must start with http:// "
        "or https://");
  CHECK(errors_of(probe("name = \"x\"")) ==
        "t.toml:8:1: missing required key 'url' in [group.secondary.probes]");
  CHECK(errors_of(probe("url = \"http://a/\"\nexpect_status = \"200-99\"")) ==
        "t.toml:11:17: group.secondary.probes.expect_status: '200-99' entry '200-99' is outside "
        "100..599 (expected e.g. \"200-399\" or \"200,204,300-399\")");
  CHECK(errors_of(probe("url = \"http://a/\"\nexpect_status = \"300-200\"")) ==
        "t.toml:11:17: group.secondary.probes.expect_status: '300-200' entry '300-200' has its "
        "bounds reversed (expected e.g. \"200-399\" or \"200,204,300-399\")");
  CHECK(errors_of(probe("url = \"http://a/\"\nexpect_status = 200")) ==
        "t.toml:11:17: group.secondary.probes.expect_status: expected a status list string like "
        "\"200-399\", got integer");
  CHECK(errors_of(probe("url = \"http://a/\"\nmethod = \"POST\"")) ==
        "t.toml:11:10: group.secondary.probes.method: invalid value 'POST' (expected one of "
        "\"GET\", \"HEAD\")");
  CHECK(errors_of(probe("url = \"http://a/\"\nheaders = { \"Bad Name\" = \"x\" }")) ==
        "t.toml:11:13: group.secondary.probes.headers: 'Bad Name' is not a valid HTTP header "
        "name");
  CHECK(errors_of(probe("url = \"http://a/\"\nheaders = { X = \"a\\r\\nInjected: 1\" }")) ==
        "t.toml:11:17: group.secondary.probes.headers.X: must not contain NUL, CR or LF "
        "characters");
  std::string long_url = "http://a/" + std::string(2040, 'x');
  CHECK(errors_of(probe("url = \"" + long_url + "\"")) ==
        "t.toml:10:7: group.secondary.probes.url: too long (2049 bytes, max 2048)");
}

TEST_CASE("location values are validated", "[config][errors]") {
  CHECK(
      errors_of("[[location]]\nname = \"a\"\nkind = \"local\"\nsource_address = \"192.0.2.300\"\n" +
                std::string(kMinimal)) ==
      "t.toml:4:18: location.source_address: '192.0.2.300' is not an IPv4 or IPv6 address");
  CHECK(errors_of(
            "[[location]]\nname = \"a\"\nkind = \"local\"\ninterface = \"a-very-long-name0\"\n" +
            std::string(kMinimal)) ==
        "t.toml:4:13: location.interface: 'a-very-long-name0' is not an interface name (1..15 "
        "characters, no '/', ':' or spaces)");
  CHECK(errors_of("[[location]]\nname = \"a b\"\nkind = \"local\"\n" + std::string(kMinimal)) ==
        "t.toml:2:8: location.name: 'a b' must be 1..64 characters of A-Z a-z 0-9 _ . -");
}

TEST_CASE("structural errors", "[config][errors]") {
  CHECK(errors_of(std::string(kMinimal) + std::string(1 << 20, '#')) ==
        "t.toml:1:1: config is too large (1048769 bytes, max 1048576)");
  CHECK(errors_of("") == "t.toml:1:1: no [[group]] defined: at least one group is required");
  CHECK(errors_of("group = []\n") == "t.toml:1:9: group: at least one [[group]] is required");
  CHECK(errors_of("[[group]]\nname = \"shop\"\n[group.primary]\n"
                  "probes = [ { kind = \"http\", url = \"https://192.0.2.10/\" } ]\n") ==
        "t.toml:1:1: missing required table [group.secondary] in [[group]] 'shop'");
  CHECK(errors_of("[[group]]\nname = \"shop\"\n[group.primary]\n"
                  "probes = [ { kind = \"http\", url = \"https://192.0.2.10/\" } ]\n"
                  "[group.secondary]\n") ==
        "t.toml:5:1: missing required key 'probes' in [group.secondary]");
  CHECK(errors_of(minimal_plus("[group.policy]\n")) == "OK");
  CHECK(errors_of("[[group]]\nname = \"shop\"\n[group.primary]\nprobes = []\n"
                  "[group.secondary]\nprobes = [ 1 ]\n") ==
        "t.toml:4:10: group.primary.probes: at least one probe is required\n"
        "t.toml:6:12: group.secondary.probes: expected a table, got integer");
}

TEST_CASE("multiple errors are reported together, in file order", "[config][errors]") {
  std::string text = R"([daemon]
log_level = "loud"
[[group]]
name = "shop"
interval = "fast"
bogus = true
[group.primary]
probes = [ { kind = "http", url = "https://192.0.2.10/" } ]
[group.policy]
warm_below = 0.8
failover_below = 0.9
[[group.warm]]
kind = "exec"
argv = ["run.sh"]
)";
  try {
    (void)parse_config(text, "multi.toml");
    FAIL("no exception");
  } catch (const ConfigException& e) {
    CHECK(std::string(e.what()) ==
          "multi.toml:2:13: daemon.log_level: invalid value 'loud' (expected one of \"debug\", "
          "\"info\", \"warn\", \"error\")\n"
          "multi.toml:3:1: missing required table [group.secondary] in [[group]] 'shop'\n"
          "multi.toml:5:12: group.interval: invalid duration 'fast' (expected e.g. \"250ms\", "
          "\"10s\", \"45m\", \"1h30m\")\n"
          "multi.toml:6:1: unknown key 'bogus' in [[group]]\n"
          "multi.toml:11:1: policy.failover_below (0.9) must be below warm_below (0.8)\n"
          "multi.toml:14:9: group.warm.argv[0]: 'run.sh' must be an absolute path (no shell, no "
          "PATH lookup)");
    CHECK(e.errors().size() == 6);
    CHECK(e.errors()[3].pos.line == 6);
    CHECK(e.errors()[3].pos.file == "multi.toml");
  }
}

TEST_CASE("error count is capped at 50", "[config][errors]") {
  std::string text = "[daemon]\n";
  for (int i = 0; i < 80; ++i) text += "unknown_" + std::to_string(i) + " = 1\n";
  text += kMinimal;
  try {
    (void)parse_config(text, "many.toml");
    FAIL("no exception");
  } catch (const ConfigException& e) {
    REQUIRE(e.errors().size() == 50);
    CHECK(e.errors()[0].to_string() == "many.toml:2:1: unknown key 'unknown_0' in [daemon]");
    CHECK(e.errors()[48].pos.line == 50);
    CHECK(e.errors()[49].message == "too many errors (80 in total); the rest are not shown");
  }
}

TEST_CASE("daemon.metrics_listen: default, accepted forms and errors", "[config][errors]") {
  auto listen_of = [](std::string_view daemon_table) {
    return parse_config(std::string(daemon_table) + std::string(kMinimal), "t.toml")
        .daemon.metrics_listen;
  };
  CHECK(listen_of("") == "127.0.0.1:9772");
  CHECK(listen_of("[daemon]\nmetrics_listen = \"\"\n").empty());
  CHECK(listen_of("[daemon]\nmetrics_listen = \"0.0.0.0:80\"\n") == "0.0.0.0:80");
  CHECK(listen_of("[daemon]\nmetrics_listen = \"[::1]:9772\"\n") == "[::1]:9772");
  CHECK(listen_of("[daemon]\nmetrics_listen = \"127.0.0.1:0\"\n") == "127.0.0.1:0");

  const std::string tail =
      " must be \"ADDR:PORT\" with an IP address, e.g. \"127.0.0.1:9772\" or \"[::1]:9772\" "
      "(\"\" disables the endpoint)";
  for (std::string_view bad : {"localhost:9772", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536",
                               "127.0.0.1:9x", "::1:9772", "[::1]", "[127.0.0.1]:80", ":9772"}) {
    CAPTURE(bad);
    CHECK(errors_of("[daemon]\nmetrics_listen = \"" + std::string(bad) + "\"\n" +
                    std::string(kMinimal)) ==
          "t.toml:2:18: daemon.metrics_listen: '" + std::string(bad) + "'" + tail);
  }
  CHECK(errors_of("[daemon]\nmetrics_listen = 9772\n" + std::string(kMinimal)) ==
        "t.toml:2:18: daemon.metrics_listen: expected a string, got integer");
}
