// Test helper: a real BIND9 `named -g` on 127.0.0.1 with a free port and a temp zone
// (RECIPES §3), started by the constructor and stopped by the destructor. Fails the test with
// a clear message when named is not installed.
#pragma once

#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "tests/probes/child_process.hpp"
#include "tests/probes/probe_rig.hpp"

namespace fo::test {

inline constexpr const char* kNamed = "/usr/sbin/named";

class NamedServer {
 public:
  // `zone_records`: lines appended to the failover.test zone.
  explicit NamedServer(const std::string& zone_records) : dir_("fo-named") {
    if (::access(kNamed, X_OK) != 0)
      FAIL(std::string(kNamed) + " not found: install bind9 (scripts/install-deps.sh)");
    port_ = unused_port_tcp_udp();
    const std::string d = dir_.path();
    dir_.write("failover.test.zone",
               "$TTL 30\n"
               "@ IN SOA ns1.failover.test. hostmaster.failover.test. ( 1 60 30 3600 30 )\n"
               "  IN NS ns1.failover.test.\n"
               "ns1 IN A 127.0.0.1\n" +
                   zone_records);
    conf_ = dir_.write("named.conf",
                       "options {\n"
                       "  directory \"" +
                           d +
                           "\";\n"
                           "  listen-on port " +
                           std::to_string(port_) +
                           " { 127.0.0.1; };\n"
                           "  listen-on-v6 { none; };\n"
                           "  pid-file \"" +
                           d +
                           "/named.pid\";\n"
                           "  session-keyfile \"" +
                           d +
                           "/session.key\";\n"
                           "  recursion no;\n"
                           "  dnssec-validation no;\n"
                           "  allow-transfer { none; };\n"
                           "  notify no;\n"
                           "  querylog yes;\n"
                           "};\n"
                           "controls { };\n"
                           "zone \"failover.test\" {\n"
                           "  type primary;\n"
                           "  file \"" +
                           d +
                           "/failover.test.zone\";\n"
                           "};\n");
    start();
  }
  ~NamedServer() { stop(); }
  NamedServer(const NamedServer&) = delete;
  NamedServer& operator=(const NamedServer&) = delete;

  int port() const { return port_; }
  std::string server() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string log() const { return read_text(dir_.file("named.log")); }

  void stop() { child_.stop(SIGTERM, std::chrono::seconds(10)); }
  void start() {
    const std::string log_file = dir_.file("named.log");
    child_ = Child({kNamed, "-g", "-4", "-c", conf_}, {"PATH=/usr/sbin:/usr/bin:/bin"}, log_file);
    // named -g logs "running" once every zone is loaded and it listens.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (log().find("\nrunning") == std::string::npos &&
           log().find(" running\n") == std::string::npos) {
      if (!child_.running() || std::chrono::steady_clock::now() > deadline) {
        INFO(log());
        FAIL("named did not start within 20 s");
      }
      ::usleep(10 * 1000);
    }
  }

 private:
  TempDir dir_;
  std::string conf_;
  int port_ = 0;
  Child child_;
};

}  // namespace fo::test
