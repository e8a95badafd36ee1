// Config loader: keys of every probe kind (http, tcp, dns, postgres, exec), their defaults and
// their errors with file:line:column.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "config_test_util.hpp"
#include "daemon/config/config.hpp"

using namespace std::chrono_literals;
using fo::config::parse_config;
using fo::config::Probe;
using fo::config::test::errors_of;
using fo::config::test::kMinimalLong;

namespace {

// kMinimalLong plus one [[group.secondary.probes]] table starting at line 8; `keys` start on
// line 9.
std::string with_probe(std::string_view keys) {
  return std::string(kMinimalLong) + "[[group.secondary.probes]]\n" + std::string(keys) + "\n";
}

Probe load_probe(std::string_view keys) {
  auto cfg = parse_config(with_probe(keys), "t.toml");
  REQUIRE(cfg.groups.size() == 1);
  REQUIRE(cfg.groups[0].secondary.probes.size() == 2);
  return cfg.groups[0].secondary.probes[1];
}

}  // namespace

TEST_CASE("http probe: new keys load", "[config][probes]") {
  Probe p = load_probe(
      "kind = \"http\"\nurl = \"https://www.example.test:8443/health\"\n"
      "body_regex = \"status: (ok|degraded)\"\nclient_cert = \"/etc/failoverd/c.pem\"\n"
      "client_key = \"/etc/failoverd/c.key\"\nresolve = \"192.0.2.10\"\nca_file = \"/ca.pem\"");
  CHECK(p.kind == "http");
  CHECK(p.name == "http#1");
  CHECK(p.http.body_regex == "status: (ok|degraded)");
  CHECK(p.http.client_cert == "/etc/failoverd/c.pem");
  CHECK(p.http.client_key == "/etc/failoverd/c.key");
  CHECK(p.http.resolve == "192.0.2.10");
  CHECK(p.http.ca_file == "/ca.pem");
  CHECK(load_probe("kind = \"http\"\nurl = \"http://www.example.test/\"\nresolve = \"::1\"")
            .http.resolve == "::1");
}

TEST_CASE("http probe: new keys are validated", "[config][probes]") {
  // The detail in parentheses is libstdc++'s text.
  CHECK_THAT(errors_of(with_probe("kind = \"http\"\nurl = \"http://a/\"\nbody_regex = \"(ok\"")),
             Catch::StartsWith("t.toml:11:14: group.secondary.probes.body_regex: '(ok' is not a "
                               "valid regular expression ("));
  CHECK(errors_of(with_probe("kind = \"http\"\nurl = \"http://a/\"\nbody_regex = \"(a)\\\\1\"")) ==
        "t.toml:11:14: group.secondary.probes.body_regex: '(a)\\\\1' is not supported "
        "(backreferences are not allowed)");
  CHECK(errors_of(with_probe("kind = \"http\"\nurl = \"http://a/\"\nbody_regex = \"" +
                             std::string(257, 'a') + "\"")) ==
        "t.toml:11:14: group.secondary.probes.body_regex: too long (257 bytes, max 256)");
  CHECK(errors_of(with_probe("kind = \"http\"\nurl = \"http://a/\"\nbody_regex = \"(ab){2,5}\"")) ==
        "t.toml:11:14: group.secondary.probes.body_regex: '(ab){2,5}' is not supported (counted "
        "repetitions like {2,5} are not allowed)");
  CHECK(load_probe("kind = \"http\"\nurl = \"http://a/\"\nbody_regex = '[{]\\{\\d+\\}'")
            .http.body_regex == "[{]\\{\\d+\\}");
  CHECK(errors_of(with_probe("kind = \"http\"\nurl = \"http://a/\"\nclient_key = \"/k\"")) ==
        "t.toml:11:1: group.secondary.probes.client_key: needs client_cert as well");
  CHECK(errors_of(with_probe("kind = \"http\"\nurl = \"http://a/\"\nresolve = \"a.example\"")) ==
        "t.toml:11:11: group.secondary.probes.resolve: 'a.example' is not an IPv4 or IPv6 "
        "address (no brackets)");
  CHECK(errors_of(with_probe("kind = \"http\"\nurl = \"http://192.0.2.1/\"\n"
                             "resolve = \"192.0.2.2\"")) ==
        "t.toml:11:11: group.secondary.probes.resolve: the url's host is already an address; "
        "resolve needs a host name in the url");
  CHECK(errors_of(with_probe("kind = \"http\"\nurl = \"http://a/\"\nsend = \"x\"")) ==
        "t.toml:11:1: unknown key 'send' in [group.secondary.probes] (did you mean 'kind'?)");
}

TEST_CASE("tcp probe: keys, defaults and errors", "[config][probes]") {
  Probe p = load_probe(
      "kind = \"tcp\"\naddress = \"[2001:db8::1]:25\"\nsend = \"EHLO x\\r\\n\"\n"
      "expect = \"250\"\nmax_read = 512\ntimeout = \"2s\"");
  CHECK(p.kind == "tcp");
  CHECK(p.name == "tcp#1");
  CHECK(p.tcp.endpoint.host == "2001:db8::1");
  CHECK(p.tcp.endpoint.port == 25);
  CHECK(p.tcp.send == "EHLO x\r\n");
  CHECK(p.tcp.expect == "250");
  CHECK(p.tcp.max_read == 512);
  CHECK(p.tcp.timeout == 2s);
  Probe d = load_probe("kind = \"tcp\"\naddress = \"192.0.2.1:443\"");
  CHECK(d.tcp.timeout == 5s);
  CHECK(d.tcp.max_read == 4096);
  CHECK(d.tcp.send.empty());

  CHECK(errors_of(with_probe("kind = \"tcp\"")) ==
        "t.toml:8:1: missing required key 'address' in [group.secondary.probes]");
  CHECK(errors_of(with_probe("kind = \"tcp\"\naddress = \"db.example:5432\"")) ==
        "t.toml:10:11: group.secondary.probes.address: 'db.example:5432' must be IP:PORT, IPv6 "
        "in brackets, e.g. \"[::1]:443\" (an address, not a host name)");
  CHECK(errors_of(with_probe("kind = \"tcp\"\naddress = \"192.0.2.1\"")) ==
        "t.toml:10:11: group.secondary.probes.address: '192.0.2.1' has no valid port (1..65535)");
  CHECK(errors_of(with_probe("kind = \"tcp\"\naddress = \"192.0.2.1:70000\"")) ==
        "t.toml:10:11: group.secondary.probes.address: '192.0.2.1:70000' has no valid port "
        "(1..65535)");
  CHECK(errors_of(with_probe("kind = \"tcp\"\naddress = \"[192.0.2.1]:80\"")) ==
        "t.toml:10:11: group.secondary.probes.address: '[192.0.2.1]:80' has no IPv6 address in "
        "the brackets");
  CHECK(errors_of(with_probe("kind = \"tcp\"\naddress = \"192.0.2.1:80\"\nmax_read = 0")) ==
        "t.toml:11:12: group.secondary.probes.max_read: 0 is out of range (1..1048576)");
  CHECK(errors_of(with_probe("kind = \"tcp\"\naddress = \"192.0.2.1:80\"\nexpect = \"\"")) ==
        "t.toml:11:10: group.secondary.probes.expect: must not be empty (omit it instead)");
  CHECK(errors_of(with_probe("kind = \"tcp\"\naddress = \"192.0.2.1:80\"\nurl = \"http://a/\"")) ==
        "t.toml:11:1: unknown key 'url' in [group.secondary.probes]");
}

TEST_CASE("dns probe: keys, defaults and errors", "[config][probes]") {
  Probe p = load_probe(
      "kind = \"dns\"\nserver = \"127.0.0.1:5353\"\nqname = \"www.Example.test\"\n"
      "type = \"AAAA\"\nexpect = \"2001:DB8:0::1\"");
  CHECK(p.kind == "dns");
  CHECK(p.dns.endpoint.host == "127.0.0.1");
  CHECK(p.dns.endpoint.port == 5353);
  CHECK(p.dns.name == "www.Example.test.");
  CHECK(p.dns.type == "AAAA");
  CHECK(p.dns.expect == "2001:db8::1");  // canonical form, as ldns prints it
  CHECK(p.dns.rcode == "NOERROR");
  Probe d = load_probe(
      "kind = \"dns\"\nserver = \"[::1]\"\nqname = \"x.test.\"\nrcode = "
      "\"NXDOMAIN\"");
  CHECK(d.dns.endpoint.host == "::1");
  CHECK(d.dns.endpoint.port == 53);
  CHECK(d.dns.type == "A");
  CHECK(d.dns.rcode == "NXDOMAIN");
  CHECK(load_probe("kind = \"dns\"\nserver = \"127.0.0.1\"\nqname = \"x.test\"\ntype = "
                   "\"CNAME\"\nexpect = \"Target.Example.\"")
            .dns.expect == "target.example");

  CHECK(errors_of(with_probe("kind = \"dns\"\nserver = \"127.0.0.1\"")) ==
        "t.toml:8:1: missing required key 'qname' in [group.secondary.probes]");
  CHECK(errors_of(with_probe("kind = \"dns\"\nserver = \"ns1.example\"\nqname = \"a.test\"")) ==
        "t.toml:10:10: group.secondary.probes.server: 'ns1.example' must be IP or IP:PORT, IPv6 "
        "in brackets, e.g. \"[::1]:53\" (an address, not a host name)");
  CHECK(errors_of(with_probe("kind = \"dns\"\nserver = \"127.0.0.1\"\nqname = \"a..test\"")) ==
        "t.toml:11:9: group.secondary.probes.qname: 'a..test' has an empty label");
  CHECK(errors_of(with_probe("kind = \"dns\"\nserver = \"127.0.0.1\"\nqname = \"a b.test\"")) ==
        "t.toml:11:9: group.secondary.probes.qname: 'a b.test' may only contain letters, digits, "
        "'-', '_', '*' and dots");
  CHECK(errors_of(with_probe("kind = \"dns\"\nserver = \"127.0.0.1\"\nqname = \"a.test\"\n"
                             "type = \"PTR\"")) ==
        "t.toml:12:8: group.secondary.probes.type: invalid value 'PTR' (expected one of \"A\", "
        "\"AAAA\", \"CNAME\", \"TXT\", \"NS\", \"SOA\", \"MX\")");
  CHECK(errors_of(with_probe("kind = \"dns\"\nserver = \"127.0.0.1\"\nqname = \"a.test\"\n"
                             "expect = \"2001:db8::1\"")) ==
        "t.toml:12:10: group.secondary.probes.expect: '2001:db8::1' is not an IPv4 address "
        "(type = \"A\")");
  CHECK(errors_of(with_probe("kind = \"dns\"\nserver = \"127.0.0.1\"\nqname = \"a.test\"\n"
                             "rcode = \"NXDOMAIN\"\nexpect = \"192.0.2.1\"")) ==
        "t.toml:13:10: group.secondary.probes.expect: '192.0.2.1' needs rcode = \"NOERROR\" (the "
        "default)");
}

TEST_CASE("postgres probe: keys, defaults and errors", "[config][probes]") {
  Probe p = load_probe(
      "kind = \"postgres\"\nhost = \"127.0.0.1\"\nport = 5433\nrole = "
      "\"standby\"\nmax_lag = \"16MB\"\npassword_file = \"/etc/failoverd/pgpass\"");
  CHECK(p.kind == "postgres");
  CHECK(p.postgres.host == "127.0.0.1");
  CHECK(p.postgres.port == 5433);
  CHECK(p.postgres.dbname == "postgres");
  CHECK(p.postgres.user == "postgres");
  CHECK(p.postgres.role == "standby");
  CHECK(p.postgres.max_lag_bytes == 16u * 1024 * 1024);
  CHECK(p.postgres.max_lag_time == 0ms);
  CHECK(p.postgres.password_file == "/etc/failoverd/pgpass");
  Probe t = load_probe(
      "kind = \"postgres\"\nconninfo = \"host=/run/postgresql dbname=app\"\n"
      "role = \"standby\"\nmax_lag = \"30s\"");
  CHECK(t.postgres.conninfo == "host=/run/postgresql dbname=app");
  CHECK(t.postgres.max_lag_time == 30s);
  CHECK(t.postgres.max_lag_bytes == 0);
  CHECK(t.postgres.role == "standby");

  CHECK(errors_of(with_probe("kind = \"postgres\"")) ==
        "t.toml:8:1: missing required key 'host' (or 'conninfo') in [group.secondary.probes]");
  CHECK(errors_of(with_probe("kind = \"postgres\"\nconninfo = \"host=/tmp\"\nport = 5432")) ==
        "t.toml:11:1: group.secondary.probes.port: give either conninfo or "
        "host/port/dbname/user");
  CHECK(errors_of(with_probe("kind = \"postgres\"\nconninfo = \"host=/tmp password = x\"")) ==
        "t.toml:10:12: group.secondary.probes.conninfo: must not contain a password (use "
        "password_file)");
  CHECK(
      errors_of(with_probe("kind = \"postgres\"\nconninfo = \"postgresql://u:pw@10.0.0.1/db\"")) ==
      "t.toml:10:12: group.secondary.probes.conninfo: must not contain a password (use "
      "password_file)");
  CHECK(errors_of(with_probe("kind = \"postgres\"\nhost = \"db.example\"")) ==
        "t.toml:10:8: group.secondary.probes.host: 'db.example' must be an IP address or a "
        "socket directory (no name lookups on the event loop)");
  CHECK(errors_of(with_probe("kind = \"postgres\"\nhost = \"::1\"\npassword_file = \"pgpass\"")) ==
        "t.toml:11:17: group.secondary.probes.password_file: 'pgpass' must be an absolute path");
  CHECK(errors_of(with_probe("kind = \"postgres\"\nhost = \"::1\"\nmax_lag = \"16MB\"")) ==
        "t.toml:11:1: group.secondary.probes.max_lag: needs role = \"standby\"");
  CHECK(errors_of(with_probe("kind = \"postgres\"\nhost = \"::1\"\nrole = \"standby\"\n"
                             "max_lag = \"16 XB\"")) ==
        "t.toml:12:11: group.secondary.probes.max_lag: '16 XB' is not a size from 1B to "
        "1048576GB (e.g. \"16MB\")");
  CHECK(errors_of(with_probe("kind = \"postgres\"\nhost = \"::1\"\nrole = \"standby\"\n"
                             "max_lag = \"soon\"")) ==
        "t.toml:12:11: group.secondary.probes.max_lag: 'soon' must be a size like \"16MB\" or a "
        "duration from 1ms to 24h like \"30s\"");
  CHECK(errors_of(with_probe("kind = \"postgres\"\nhost = \"::1\"\nrole = \"leader\"")) ==
        "t.toml:11:8: group.secondary.probes.role: invalid value 'leader' (expected one of "
        "\"primary\", \"standby\")");
}

TEST_CASE("exec probe: keys, defaults and errors", "[config][probes]") {
  Probe p = load_probe(
      "kind = \"exec\"\nargv = [\"/usr/local/bin/check\", \"--quick\"]\n"
      "timeout = \"3s\"\nmax_output = 100");
  CHECK(p.kind == "exec");
  CHECK(p.exec.argv == std::vector<std::string>{"/usr/local/bin/check", "--quick"});
  CHECK(p.exec.timeout == 3s);
  CHECK(p.exec.max_output == 100);
  CHECK(load_probe("kind = \"exec\"\nargv = [\"/bin/true\"]").exec.max_output == 4096);

  CHECK(errors_of(with_probe("kind = \"exec\"\nargv = [\"check\"]")) ==
        "t.toml:10:9: group.secondary.probes.argv[0]: 'check' must be an absolute path (no "
        "shell, no PATH lookup)");
  CHECK(errors_of(with_probe("kind = \"exec\"")) ==
        "t.toml:8:1: missing required key 'argv' in [group.secondary.probes]");
  CHECK(errors_of(with_probe("kind = \"exec\"\nargv = [\"/bin/true\"]\nenv = {}")) ==
        "t.toml:11:1: unknown key 'env' in [group.secondary.probes]");
}

TEST_CASE("every probe kind's timeout is checked against the interval", "[config][probes]") {
  const std::string text =
      "[[group]]\nname = \"shop\"\ninterval = \"1s\"\n[group.primary]\n"
      "probes = [ { kind = \"http\", url = \"http://a/\", timeout = \"1s\" } ]\n"
      "[group.secondary]\n"
      "probes = [ { kind = \"dns\", server = \"127.0.0.1\", qname = \"a\" } ]\n";
  CHECK(errors_of(text) ==
        "t.toml:7:12: group.secondary.probes.timeout (5s, the default) must not exceed the group "
        "interval (1s)");
}
