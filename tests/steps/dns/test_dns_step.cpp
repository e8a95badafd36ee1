// The dns step against real servers: a BIND9 primary (RFC 2136 + TSIG) with a BIND9 secondary
// fed by NOTIFY/AXFR, and PowerDNS with its HTTP API; plus its config keys and key-file parser.
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>

#include "actions/dns/tsig_key.hpp"
#include "daemon/config/config.hpp"
#include "tests/steps/dns/dns_servers.hpp"

using namespace std::chrono_literals;
using fo::actions::StepOutcome;
using fo::core::Site;
using fo::test::TempDir;
using fo::test::dns::BindPair;
using fo::test::dns::kApiKey;
using fo::test::dns::key_file_text;
using fo::test::dns::kSecret;
using fo::test::dns::kWrongSecret;
using fo::test::dns::PowerDns;
using fo::test::dns::StepRig;
using Op = StepRig::Op;

namespace {

fo::config::DnsServer server(const std::string& text) {
  const auto colon = text.rfind(':');
  return {text, text.substr(0, colon), std::stoi(text.substr(colon + 1))};
}

// A step as the config loader would produce it.
fo::config::Step rfc2136_step(const std::string& primary, const std::string& key_file,
                              std::vector<std::string> verify) {
  fo::config::Step step;
  step.kind = "dns";
  step.name = "dns#0";
  step.timeout = 10s;
  auto& d = step.dns;
  d.zone = "failover.test.";
  d.record = "www.failover.test.";
  d.type = "A";
  d.ttl = 60;
  d.primary = {"192.0.2.10"};
  d.secondary = {"198.51.100.20", "198.51.100.21"};
  d.server = server(primary);
  d.tsig_key_file = key_file;
  for (const auto& v : verify) d.verify.push_back(server(v));
  d.verify_interval = 50ms;
  return step;
}

std::string sorted_lines(std::string text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : ",") + l;
  return out;
}

}  // namespace

TEST_CASE("rfc2136 update reaches primary and secondary and a re-run sends nothing",
          "[dns][bind]") {
  BindPair bind;
  TempDir dir("fo-dns-key");
  const std::string key = dir.write("feas.key", key_file_text("feas-key", kSecret), 0600);
  auto step = rfc2136_step(bind.primary(), key, {bind.primary(), bind.secondary()});
  StepRig rig;

  StepOutcome check = rig.run(Op::check, step, Site::secondary);
  INFO(check.detail);
  CHECK(check.ok());
  CHECK(check.detail.find("accepts TSIG key 'feas-key'") != std::string::npos);

  StepOutcome drift = rig.run(Op::observe, step, Site::secondary);
  CHECK_FALSE(drift.ok());
  CHECK(drift.detail.find(bind.secondary() + " answers 192.0.2.10") != std::string::npos);

  const long serial = bind.primary_serial();
  StepOutcome applied = rig.run(Op::apply, step, Site::secondary);
  INFO(applied.detail);
  REQUIRE(applied.ok());
  CHECK_FALSE(applied.already_done);
  CHECK(applied.detail.find("2/2 servers answer 198.51.100.20, 198.51.100.21") !=
        std::string::npos);
  CHECK(sorted_lines(bind.dig_primary("www.failover.test")) == "198.51.100.20,198.51.100.21");
  CHECK(sorted_lines(bind.dig_secondary("www.failover.test")) == "198.51.100.20,198.51.100.21");
  const long updated_serial = bind.primary_serial();
  CHECK(updated_serial == serial + 1);
  CHECK(bind.secondary_serial() == updated_serial);

  // Re-run (e.g. after a crash before the intent log's "done"): nothing is sent.
  StepOutcome again = rig.run(Op::apply, step, Site::secondary);
  INFO(again.detail);
  CHECK(again.ok());
  CHECK(again.already_done);
  CHECK(bind.primary_serial() == updated_serial);
  CHECK(rig.run(Op::observe, step, Site::secondary).ok());

  // Failback to the primary's value, with its own TTL.
  StepOutcome back = rig.run(Op::apply, step, Site::primary);
  CHECK(back.ok());
  CHECK_FALSE(back.already_done);
  CHECK(bind.dig_secondary("www.failover.test") == "192.0.2.10");
  CHECK(bind.primary_serial() == updated_serial + 1);
}

TEST_CASE("rfc2136 CNAME record is replaced and verified", "[dns][bind]") {
  BindPair bind;
  TempDir dir("fo-dns-key");
  const std::string key = dir.write("feas.key", key_file_text("feas-key", kSecret), 0600);
  auto step = rfc2136_step(bind.primary(), key, {bind.primary(), bind.secondary()});
  step.dns.record = "alias.failover.test.";
  step.dns.type = "CNAME";
  step.dns.primary = {"www.failover.test."};
  step.dns.secondary = {"www2.failover.test."};
  StepRig rig;
  StepOutcome o = rig.run(Op::apply, step, Site::secondary);
  INFO(o.detail);
  CHECK(o.ok());
  CHECK(bind.dig_secondary("alias.failover.test", "CNAME") == "www2.failover.test.");
}

TEST_CASE("rfc2136 wrong TSIG secret fails once and is not retried", "[dns][bind]") {
  BindPair bind;
  TempDir dir("fo-dns-key");
  const std::string key = dir.write("feas.key", key_file_text("feas-key", kWrongSecret), 0600);
  auto step = rfc2136_step(bind.primary(), key, {bind.primary(), bind.secondary()});
  StepRig rig;
  const long serial = bind.primary_serial();

  StepOutcome o = rig.run(Op::apply, step, Site::secondary);
  INFO(o.detail);
  CHECK_FALSE(o.ok());
  CHECK_FALSE(o.retryable);
  CHECK(o.detail == "TSIG key 'feas-key' rejected by " + bind.primary() + " (BADSIG)");
  CHECK(bind.primary_serial() == serial);
  CHECK(bind.dig_primary("www.failover.test") == "192.0.2.10");
  // Exactly one signed request reached the server: the UPDATE (the observations are unsigned).
  CHECK(fo::test::dns::count(bind.primary_log(), "tsig verify failure") == 1);

  StepOutcome check = rig.run(Op::check, step, Site::secondary);
  INFO(check.detail);
  CHECK_FALSE(check.ok());
  CHECK_FALSE(check.retryable);
  CHECK(check.detail == "TSIG key 'feas-key' rejected by " + bind.primary() + " (BADSIG)");
}

TEST_CASE(
    "rfc2136 with hmac-sha224 and hmac-sha384 keys updates, verifies and refuses a wrong secret",
    "[dns][bind][tsig]") {
  using fo::test::dns::BindKey;
  BindPair bind({BindKey{"k224", "hmac-sha224", fo::test::dns::kSha224Secret},
                 BindKey{"k384", "hmac-sha384", fo::test::dns::kSha384Secret}});
  TempDir dir("fo-dns-key");
  struct Case {
    std::string name, algorithm, secret, wrong;
    Site target;
    std::string values;
  };
  const std::vector<Case> cases = {
      {"k224", "hmac-sha224", fo::test::dns::kSha224Secret, fo::test::dns::kSha224WrongSecret,
       Site::secondary, "198.51.100.20,198.51.100.21"},
      {"k384", "hmac-sha384", fo::test::dns::kSha384Secret, fo::test::dns::kSha384WrongSecret,
       Site::primary, "192.0.2.10"}};
  StepRig rig;
  for (const Case& c : cases) {
    INFO(c.algorithm);
    const std::string key =
        dir.write(c.name + ".key", key_file_text(c.name, c.secret, c.algorithm), 0600);
    auto step = rfc2136_step(bind.primary(), key, {bind.primary(), bind.secondary()});

    // The signed SOA query and its signed reply.
    StepOutcome check = rig.run(Op::check, step, c.target);
    INFO(check.detail);
    CHECK(check.ok());
    CHECK(check.detail.find("accepts TSIG key '" + c.name + "'") != std::string::npos);

    // The signed UPDATE, the reply's signature verified, then both servers verified.
    const long serial = bind.primary_serial();
    StepOutcome applied = rig.run(Op::apply, step, c.target);
    INFO(applied.detail);
    CHECK(applied.ok());
    CHECK_FALSE(applied.already_done);
    CHECK(bind.primary_serial() == serial + 1);
    CHECK(sorted_lines(bind.dig_secondary("www.failover.test")) == c.values);

    // The same key name with a wrong secret: BIND answers BADSIG, once, and nothing changes.
    const std::string wrong =
        dir.write(c.name + "-wrong.key", key_file_text(c.name, c.wrong, c.algorithm), 0600);
    step.dns.tsig_key_file = wrong;
    const Site other = c.target == Site::primary ? Site::secondary : Site::primary;
    const std::size_t failures_before =
        fo::test::dns::count(bind.primary_log(), "tsig verify failure");
    StepOutcome refused = rig.run(Op::apply, step, other);
    INFO(refused.detail);
    CHECK_FALSE(refused.ok());
    CHECK_FALSE(refused.retryable);
    CHECK(refused.detail ==
          "TSIG key '" + c.name + "' rejected by " + bind.primary() + " (BADSIG)");
    CHECK(bind.primary_serial() == serial + 1);
    CHECK(fo::test::dns::count(bind.primary_log(), "tsig verify failure") == failures_before + 1);
    StepOutcome refused_check = rig.run(Op::check, step, other);
    CHECK_FALSE(refused_check.retryable);
    CHECK(refused_check.detail == refused.detail);
  }
}

TEST_CASE("rfc2136 unknown key name is reported as BADKEY", "[dns][bind]") {
  BindPair bind;
  TempDir dir("fo-dns-key");
  const std::string key = dir.write("other.key", key_file_text("other-key", kSecret), 0600);
  auto step = rfc2136_step(bind.primary(), key, {bind.primary()});
  StepRig rig;
  StepOutcome o = rig.run(Op::apply, step, Site::secondary);
  CHECK_FALSE(o.retryable);
  CHECK(o.detail == "TSIG key 'other-key' rejected by " + bind.primary() + " (BADKEY)");
}

TEST_CASE("rfc2136 unsigned update is refused by policy", "[dns][bind]") {
  BindPair bind;
  auto step = rfc2136_step(bind.primary(), "", {bind.primary()});
  step.dns.tsig = false;
  StepRig rig;
  StepOutcome o = rig.run(Op::apply, step, Site::secondary);
  INFO(o.detail);
  CHECK_FALSE(o.ok());
  CHECK_FALSE(o.retryable);
  CHECK(o.detail.find("(REFUSED)") != std::string::npos);
}

TEST_CASE("rfc2136 server down fails fast and may be retried", "[dns][bind]") {
  TempDir dir("fo-dns-key");
  const std::string key = dir.write("feas.key", key_file_text("feas-key", kSecret), 0600);
  const std::string down = "127.0.0.1:" + std::to_string(fo::test::unused_port_tcp_udp());
  auto step = rfc2136_step(down, key, {down});
  step.timeout = 3s;
  StepRig rig;
  StepOutcome o = rig.run(Op::apply, step, Site::secondary);
  INFO(o.detail);
  CHECK_FALSE(o.ok());
  CHECK(o.retryable);
  CHECK(o.detail == "UPDATE to " + down + " failed: connection refused");
  CHECK(rig.took_ms < 1000);
  StepOutcome check = rig.run(Op::check, step, Site::secondary);
  CHECK_FALSE(check.ok());
  CHECK(check.retryable);
}

TEST_CASE("rfc2136 verification stops at the step timeout", "[dns][bind]") {
  BindPair bind;
  TempDir dir("fo-dns-key");
  const std::string key = dir.write("feas.key", key_file_text("feas-key", kSecret), 0600);
  const std::string down = "127.0.0.1:" + std::to_string(fo::test::unused_port_tcp_udp());
  auto step = rfc2136_step(bind.primary(), key, {bind.primary(), down});
  step.timeout = 800ms;
  StepRig rig;
  StepOutcome o = rig.run(Op::apply, step, Site::secondary);
  INFO(o.detail);
  CHECK(o.status == StepOutcome::Status::timed_out);
  CHECK(o.retryable);
  CHECK(o.detail.find("updated, but not all servers answer") == 0);
  CHECK(o.detail.find(down + ": connection refused") != std::string::npos);
  CHECK(rig.took_ms >= 780);
  CHECK(rig.took_ms < 1500);
}

TEST_CASE("dns secret files readable by others are refused", "[dns]") {
  TempDir dir("fo-dns-key");
  const std::string key = dir.write("feas.key", key_file_text("feas-key", kSecret), 0644);
  auto step = rfc2136_step("127.0.0.1:9", key, {"127.0.0.1:9"});
  StepRig rig;
  for (Op op : {Op::apply, Op::check}) {
    StepOutcome o = rig.run(op, step, Site::secondary);
    CHECK_FALSE(o.ok());
    CHECK_FALSE(o.retryable);
    CHECK(o.detail.find("accessible by others (mode 0644)") != std::string::npos);
  }
  // A malformed key file: the error names the problem, never the content.
  const std::string bad =
      dir.write("bad.key", std::string("key \"k\" { secret \"") + kSecret + "\"; };\n", 0600);
  step.dns.tsig_key_file = bad;
  StepOutcome o = rig.run(Op::apply, step, Site::secondary);
  CHECK_FALSE(o.retryable);
  CHECK(o.detail == "TSIG key file " + bad + ": the key has no 'algorithm'");
}

TEST_CASE("BIND key files are parsed and unsupported algorithms refused", "[dns]") {
  using fo::actions::dns::parse_tsig_key;
  auto good = parse_tsig_key("# made by tsig-keygen\n" + key_file_text("feas-key", kSecret));
  REQUIRE(good.ok);
  CHECK(good.key.name == "feas-key");
  CHECK(good.key.algorithm == "hmac-sha256");
  CHECK(good.key.algorithm_name == "hmac-sha256.");
  CHECK(good.key.secret == kSecret);
  auto md5 = parse_tsig_key(key_file_text("k", kSecret, "HMAC-MD5"));
  REQUIRE(md5.ok);
  CHECK(md5.key.algorithm_name == "hmac-md5.sig-alg.reg.int.");
  CHECK(parse_tsig_key(key_file_text("k", kSecret, "hmac-sha512")).ok);
  CHECK(parse_tsig_key(key_file_text("k", kSecret, "hmac-sha1")).ok);
  for (const auto& [written, algorithm] :
       {std::pair{"hmac-sha224", "hmac-sha224"}, std::pair{"hmac-sha384", "hmac-sha384"},
        std::pair{"HMAC-SHA384.", "hmac-sha384"}}) {
    auto p = parse_tsig_key(key_file_text("k", kSecret, written));
    REQUIRE(p.ok);
    CHECK(p.key.algorithm == algorithm);
    CHECK(p.key.algorithm_name == std::string(algorithm) + ".");
  }
  CHECK(parse_tsig_key(key_file_text("k", kSecret, "hmac-md5.sig-alg.reg.int.")).key.algorithm ==
        "hmac-md5");
  CHECK(parse_tsig_key(key_file_text("k", kSecret, "rsa")).error.find("unknown algorithm") == 0);
  for (const char* broken : {"", "key", "key \"k\" {", "key \"k\" { algorithm hmac-sha256; };",
                             "key \"k\" { algorithm hmac-sha256; secret \"%%%\"; };", "/* open",
                             "key \"k\" { algorithm hmac-sha256; secret \"QUJD\"; }; "
                             "key \"j\" { algorithm hmac-sha256; secret \"QUJD\"; };"}) {
    auto p = parse_tsig_key(broken);
    INFO(broken);
    CHECK_FALSE(p.ok);
    CHECK_FALSE(p.error.empty());
    CHECK(p.error.find("QUJD") == std::string::npos);
  }
}

TEST_CASE("key files written by tsig-keygen parse for every algorithm", "[dns][tsig]") {
  using fo::actions::dns::parse_tsig_key;
  TempDir dir("fo-dns-keygen");
  for (const std::string algorithm :
       {"hmac-md5", "hmac-sha1", "hmac-sha224", "hmac-sha256", "hmac-sha384", "hmac-sha512"}) {
    INFO(algorithm);
    const std::string out = dir.file(algorithm + ".key");
    REQUIRE(fo::test::run_command({"/usr/sbin/tsig-keygen", "-a", algorithm, "gen-key"},
                                  fo::test::dns::kToolEnv, out, {}, std::chrono::seconds(10)) == 0);
    auto p = parse_tsig_key(fo::test::read_text(out));
    INFO(p.error);
    REQUIRE(p.ok);
    CHECK(p.key.name == "gen-key");
    CHECK(p.key.algorithm == algorithm);
  }
}

namespace {

fo::config::Step powerdns_step(const PowerDns& pdns, const std::string& key_file) {
  fo::config::Step step;
  step.kind = "dns";
  step.timeout = 10s;
  auto& d = step.dns;
  d.provider = "powerdns";
  d.zone = "failover.test.";
  d.record = "www.failover.test.";
  d.primary = {"192.0.2.10"};
  d.secondary = {"198.51.100.20"};
  d.api_url = pdns.api_url();
  d.api_key_file = key_file;
  d.verify = {server(pdns.dns())};
  d.verify_interval = 50ms;
  return step;
}

}  // namespace

TEST_CASE("powerdns API update is verified and a re-run sends nothing", "[dns][pdns]") {
  PowerDns pdns;
  TempDir dir("fo-dns-key");
  const std::string key = dir.write("api.key", std::string(kApiKey) + "\n", 0600);
  auto step = powerdns_step(pdns, key);
  StepRig rig;

  StepOutcome check = rig.run(Op::check, step, Site::secondary);
  INFO(check.detail);
  CHECK(check.ok());
  CHECK_FALSE(rig.run(Op::observe, step, Site::secondary).ok());

  StepOutcome applied = rig.run(Op::apply, step, Site::secondary);
  INFO(applied.detail);
  REQUIRE(applied.ok());
  CHECK_FALSE(applied.already_done);
  CHECK(pdns.dig_www() == "198.51.100.20");
  INFO(pdns.log());
  CHECK(fo::test::dns::count(pdns.log(), "\"PATCH ") == 1);

  StepOutcome again = rig.run(Op::apply, step, Site::secondary);
  CHECK(again.ok());
  CHECK(again.already_done);
  CHECK(fo::test::dns::count(pdns.log(), "\"PATCH ") == 1);
  CHECK(rig.run(Op::observe, step, Site::secondary).ok());
}

TEST_CASE("powerdns wrong API key fails once and is not retried", "[dns][pdns]") {
  PowerDns pdns;
  TempDir dir("fo-dns-key");
  const std::string key = dir.write("api.key", "wrong-api-key-4711\n", 0600);
  auto step = powerdns_step(pdns, key);
  StepRig rig;
  StepOutcome o = rig.run(Op::apply, step, Site::secondary);
  INFO(o.detail);
  CHECK_FALSE(o.ok());
  CHECK_FALSE(o.retryable);
  CHECK(o.detail == "API key rejected by " + pdns.api_url() + " (HTTP 401)");
  CHECK(pdns.dig_www() == "192.0.2.10");
  StepOutcome check = rig.run(Op::check, step, Site::secondary);
  CHECK_FALSE(check.retryable);
  CHECK(check.detail == o.detail);

  // An unknown zone is not retried either.
  std::ofstream(key, std::ios::trunc) << kApiKey;
  step.dns.zone = "nowhere.test.";
  step.dns.record = "www.nowhere.test.";
  StepOutcome missing = rig.run(Op::check, step, Site::secondary);
  INFO(missing.detail);
  CHECK_FALSE(missing.retryable);
  CHECK(missing.detail.find("has no zone nowhere.test.") != std::string::npos);
}

TEST_CASE("powerdns API down fails fast and may be retried", "[dns][pdns]") {
  TempDir dir("fo-dns-key");
  const std::string key = dir.write("api.key", kApiKey, 0600);
  fo::config::Step step;
  step.kind = "dns";
  step.timeout = 3s;
  step.dns.provider = "powerdns";
  step.dns.zone = "failover.test.";
  step.dns.record = "www.failover.test.";
  step.dns.primary = {"192.0.2.10"};
  step.dns.secondary = {"198.51.100.20"};
  step.dns.api_url = "http://127.0.0.1:" + std::to_string(fo::test::unused_port());
  step.dns.api_key_file = key;
  step.dns.verify = {server("127.0.0.1:" + std::to_string(fo::test::unused_port_tcp_udp()))};
  StepRig rig;
  StepOutcome o = rig.run(Op::apply, step, Site::secondary);
  INFO(o.detail);
  CHECK_FALSE(o.ok());
  CHECK(o.retryable);
  CHECK(o.detail.find("PowerDNS API at " + step.dns.api_url) == 0);
  CHECK(rig.took_ms < 1000);
}
