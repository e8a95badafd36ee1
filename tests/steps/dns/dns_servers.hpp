// Test helpers for the dns step: a real BIND9 primary (TSIG updates) with a real BIND9
// secondary fed by NOTIFY + zone transfer, a real PowerDNS (gsqlite3 + HTTP API), dig for
// reading answers, and a loop running the plugin. Every server is a child process stopped by
// its destructor (and killed with the test binary, PR_SET_PDEATHSIG).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "actions/dns/dns_step.hpp"
#include "daemon/platform/curl_multi.hpp"
#include "tests/platform/loop_util.hpp"
#include "tests/probes/child_process.hpp"
#include "tests/probes/probe_rig.hpp"

namespace fo::test::dns {

inline constexpr const char* kSecret = "FtCUJtDFAMJOMmBcnCKqYwexLZTSkvZm1LUIXtGxn/8=";
inline constexpr const char* kWrongSecret = "AAAAJtDFAMJOMmBcnCKqYwexLZTSkvZm1LUIXtGxn/8=";
inline constexpr const char* kApiKey = "pdns-test-api-key-0123456789";

inline std::string key_file_text(const std::string& name, const std::string& secret,
                                 const std::string& algorithm = "hmac-sha256") {
  return "key \"" + name + "\" {\n\talgorithm " + algorithm + ";\n\tsecret \"" + secret +
         "\";\n};\n";
}

inline const std::vector<std::string> kToolEnv = {"PATH=/usr/sbin:/usr/bin:/bin"};

// Polls `ready` every 10 ms up to `limit`.
template <typename F>
bool wait_for(F ready, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!ready()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    ::usleep(10 * 1000);
  }
  return true;
}

// `dig +short` against 127.0.0.1:port; "" on any failure.
inline std::string dig(TempDir& dir, int port, const std::string& name, const std::string& type) {
  const std::string out = dir.file("dig.out");
  ::unlink(out.c_str());
  const int rc = run_command({"/usr/bin/dig", "+short", "+time=1", "+tries=1", "@127.0.0.1", "-p",
                              std::to_string(port), name, type},
                             kToolEnv, out, {}, std::chrono::seconds(5));
  if (rc != 0) return "";
  std::string text = read_text(out);
  if (text.rfind(";;", 0) == 0) return "";  // dig prints communication errors on stdout
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

inline long soa_serial(TempDir& dir, int port) {
  std::istringstream in(dig(dir, port, "failover.test", "SOA"));
  std::string mname, rname;
  long serial = -1;
  in >> mname >> rname >> serial;
  return serial;
}

inline std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// named -g; ready once it logs "running".
inline Child start_named(TempDir& dir, const std::string& conf) {
  const std::string log = dir.file("named.log");
  Child child({"/usr/sbin/named", "-g", "-4", "-c", conf}, kToolEnv, log);
  const bool up = wait_for(
      [&] {
        const std::string text = read_text(log);
        return text.find(" running\n") != std::string::npos || !child.running();
      },
      std::chrono::seconds(20));
  if (!up || !child.running()) {
    INFO(read_text(log));
    FAIL("named did not start within 20 s");
  }
  return child;
}

// Secrets of keys of the other algorithms (as tsig-keygen -a writes them).
inline constexpr const char* kSha224Secret = "jE72iqJTezT/FbxH4VT22iXjx9omDkHj3oIe4g==";
inline constexpr const char* kSha384Secret =
    "pcMu3key7MUenu1UYo5W2JecbxUwy1aV9Nftz4ZKQH+jFdpHej53YoT/BRWOZKqX";

inline constexpr const char* kSha224WrongSecret = "AAAAiqJTezT/FbxH4VT22iXjx9omDkHj3oIe4g==";
inline constexpr const char* kSha384WrongSecret =
    "AAAAAkey7MUenu1UYo5W2JecbxUwy1aV9Nftz4ZKQH+jFdpHej53YoT/BRWOZKqX";

struct BindKey {
  std::string name;
  std::string algorithm;
  std::string secret;
};

// A primary taking TSIG-signed updates for failover.test and a secondary that follows it. The
// primary knows "feas-key" (hmac-sha256, kSecret) and any `extra_keys`, all allowed to update.
class BindPair {
 public:
  explicit BindPair(const std::vector<BindKey>& extra_keys = {})
      : primary_dir_("fo-dns-p"), secondary_dir_("fo-dns-s") {
    primary_port_ = unused_port_tcp_udp();
    do secondary_port_ = unused_port_tcp_udp();
    while (secondary_port_ == primary_port_);
    const std::string p = primary_dir_.path();
    const std::string s = secondary_dir_.path();
    std::string keys = key_file_text("feas-key", kSecret);
    std::string grants = "grant feas-key zonesub ANY; ";
    for (const BindKey& k : extra_keys) {
      keys += key_file_text(k.name, k.secret, k.algorithm);
      grants += "grant " + k.name + " zonesub ANY; ";
    }
    primary_dir_.write("key.conf", keys, 0600);
    primary_dir_.write("failover.test.zone",
                       "$TTL 30\n"
                       "@ IN SOA ns1.failover.test. hostmaster.failover.test. ( 1 60 30 3600 30 )\n"
                       "  IN NS ns1.failover.test.\n"
                       "ns1 IN A 127.0.0.1\n"
                       "www IN A 192.0.2.10\n"
                       "alias IN CNAME www.failover.test.\n");
    const std::string common =
        "  listen-on-v6 { none; };\n  recursion no;\n"
        "  dnssec-validation no;\n";
    const std::string primary_conf = primary_dir_.write(
        "named.conf", "options {\n  directory \"" + p + "\";\n  listen-on port " +
                          std::to_string(primary_port_) + " { 127.0.0.1; };\n  pid-file \"" + p +
                          "/named.pid\";\n  session-keyfile \"" + p + "/session.key\";\n" + common +
                          "  notify explicit;\n  notify-delay 0;\n  also-notify { 127.0.0.1 "
                          "port " +
                          std::to_string(secondary_port_) +
                          "; };\n  allow-transfer { 127.0.0.1; };\n};\ncontrols { };\n"
                          "include \"" +
                          p +
                          "/key.conf\";\n"
                          "zone \"failover.test\" {\n  type primary;\n  file \"" +
                          p +
                          "/failover.test.zone\";\n"
                          "  update-policy { " +
                          grants + "};\n};\n");
    const std::string secondary_conf = secondary_dir_.write(
        "named.conf", "options {\n  directory \"" + s + "\";\n  listen-on port " +
                          std::to_string(secondary_port_) + " { 127.0.0.1; };\n  pid-file \"" + s +
                          "/named.pid\";\n  session-keyfile \"" + s + "/session.key\";\n" + common +
                          "  notify no;\n  allow-transfer { none; };\n};\ncontrols { };\n"
                          "zone \"failover.test\" {\n  type secondary;\n  primaries { 127.0.0.1 "
                          "port " +
                          std::to_string(primary_port_) + "; };\n  file \"" + s +
                          "/failover.test.db\";\n};\n");
    primary_ = start_named(primary_dir_, primary_conf);
    secondary_ = start_named(secondary_dir_, secondary_conf);
    if (!wait_for(
            [&] {
              return dig(secondary_dir_, secondary_port_, "www.failover.test", "A") == "192.0.2.10";
            },
            std::chrono::seconds(20))) {
      INFO(secondary_log());
      FAIL("the secondary did not load the zone within 20 s");
    }
  }

  int primary_port() const { return primary_port_; }
  int secondary_port() const { return secondary_port_; }
  std::string primary() const { return "127.0.0.1:" + std::to_string(primary_port_); }
  std::string secondary() const { return "127.0.0.1:" + std::to_string(secondary_port_); }
  std::string primary_log() const { return read_text(primary_dir_.file("named.log")); }
  std::string secondary_log() const { return read_text(secondary_dir_.file("named.log")); }
  std::string dig_primary(const std::string& name, const std::string& type = "A") {
    return dig(primary_dir_, primary_port_, name, type);
  }
  std::string dig_secondary(const std::string& name, const std::string& type = "A") {
    return dig(secondary_dir_, secondary_port_, name, type);
  }
  long primary_serial() { return soa_serial(primary_dir_, primary_port_); }
  long secondary_serial() { return soa_serial(secondary_dir_, secondary_port_); }

 private:
  TempDir primary_dir_;
  TempDir secondary_dir_;
  int primary_port_ = 0;
  int secondary_port_ = 0;
  // Declared last: stopped first, before their directories are removed.
  Child secondary_;
  Child primary_;

 public:
  ~BindPair() {
    secondary_.stop(SIGTERM, std::chrono::seconds(10));
    primary_.stop(SIGTERM, std::chrono::seconds(10));
  }
};

// PowerDNS Authoritative with gsqlite3 and the HTTP API (RECIPES §3); zone failover.test with
// www A 192.0.2.10.
class PowerDns {
 public:
  PowerDns() : dir_("fo-pdns") {
    if (::access("/usr/sbin/pdns_server", X_OK) != 0)
      FAIL(
          "pdns_server not found: install pdns-server pdns-backend-sqlite3 "
          "(scripts/install-deps.sh)");
    dns_port_ = unused_port_tcp_udp();
    do api_port_ = unused_port();
    while (api_port_ == dns_port_);
    const std::string d = dir_.path();
    dir_.write("pdns.conf",
               "launch=gsqlite3\ngsqlite3-database=" + d +
                   "/pdns.sqlite3\nlocal-address=127.0.0.1:" + std::to_string(dns_port_) +
                   "\ndaemon=no\nguardian=no\ndisable-syslog=yes\nloglevel=6\n"
                   "socket-dir=" +
                   d + "\napi=yes\napi-key=" + kApiKey +
                   "\nwebserver=yes\nwebserver-address=127.0.0.1\nwebserver-port=" +
                   std::to_string(api_port_) +
                   "\nwebserver-allow-from=127.0.0.0/8\nwebserver-loglevel=normal\n"
                   "security-poll-suffix=\n"
                   "default-soa-content=ns1.@ hostmaster.@ 1 10800 3600 604800 30\n");
    const std::string log = dir_.file("setup.log");
    auto run = [&](std::vector<std::string> argv) {
      const int rc = run_command(argv, kToolEnv, log, {}, std::chrono::seconds(20));
      if (rc != 0) {
        INFO(read_text(log));
        FAIL("PowerDNS setup step failed: " + argv[0]);
      }
    };
    run({"/usr/bin/sqlite3", d + "/pdns.sqlite3",
         ".read /usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql"});
    run({"/usr/bin/pdnsutil", "--config-dir=" + d, "create-zone", "failover.test",
         "ns1.failover.test"});
    run({"/usr/bin/pdnsutil", "--config-dir=" + d, "add-record", "failover.test", "www", "A", "30",
         "192.0.2.10"});
    child_ = Child({"/usr/sbin/pdns_server", "--config-dir=" + d}, kToolEnv, dir_.file("pdns.log"));
    const bool up = wait_for(
        [&] {
          return dig(dir_, dns_port_, "www.failover.test", "A") == "192.0.2.10" && api_listening();
        },
        std::chrono::seconds(20));
    if (!up) {
      INFO(read_text(dir_.file("pdns.log")));
      FAIL("pdns_server did not answer within 20 s");
    }
  }
  ~PowerDns() { child_.stop(SIGTERM, std::chrono::seconds(10)); }

  int dns_port() const { return dns_port_; }
  std::string dns() const { return "127.0.0.1:" + std::to_string(dns_port_); }
  std::string api_url() const { return "http://127.0.0.1:" + std::to_string(api_port_); }
  std::string log() const { return read_text(dir_.file("pdns.log")); }
  std::string dig_www() { return dig(dir_, dns_port_, "www.failover.test", "A"); }

 private:
  bool api_listening() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(api_port_));
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
  }

  TempDir dir_;
  int dns_port_ = 0;
  int api_port_ = 0;
  Child child_;
};

// One loop with the daemon's CurlMulti and the dns plugin; runs one apply/check/observe.
struct StepRig {
  platform::EventPtr loop = platform::make_event();
  platform::CurlMulti curl{loop.get()};
  std::unique_ptr<actions::StepPlugin> plugin = actions::make_dns_step_plugin(loop.get(), curl);
  double took_ms = 0;

  enum class Op { apply, check, observe };

  actions::StepOutcome run(Op op, const config::Step& step, core::Site target,
                           std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    actions::StepContext ctx;
    ctx.group = "shop";
    ctx.target = target;
    ctx.from = target == core::Site::primary ? core::Site::secondary : core::Site::primary;
    std::optional<actions::StepOutcome> result;
    int calls = 0;
    auto done = [&](actions::StepOutcome o) {
      ++calls;
      result = std::move(o);
    };
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<actions::StepAttempt> attempt = op == Op::apply ? plugin->apply(step, ctx, done)
                                                    : op == Op::check
                                                        ? plugin->check(step, ctx, done)
                                                        : plugin->observe(step, ctx, done);
    REQUIRE(attempt != nullptr);
    REQUIRE(calls == 0);  // never synchronous
    REQUIRE(run_until(
        loop.get(), [&] { return calls > 0; }, limit));
    took_ms = ms_since(t0);
    for (int i = 0; i < 3; ++i) sd_event_run(loop.get(), 1000);  // no second call follows
    REQUIRE(calls == 1);
    // Secrets never leave the plugin.
    for (const std::string& secret :
         {std::string(kSecret), std::string(kWrongSecret), std::string(kApiKey),
          std::string("wrong-api-key-4711"), std::string(kSha224Secret), std::string(kSha384Secret),
          std::string(kSha224WrongSecret), std::string(kSha384WrongSecret)}) {
      CHECK(result->detail.find(secret) == std::string::npos);
      CHECK(result->output.find(secret) == std::string::npos);
    }
    return *result;
  }
};

}  // namespace fo::test::dns
