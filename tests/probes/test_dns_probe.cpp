// DNS probe against a real BIND9 (named -g on 127.0.0.1, random port, temp zone): A match and
// mismatch, NXDOMAIN, TXT, a TXT too large for UDP (TCP retry), server down, a silent server,
// and a server answering with the wrong ID or question.
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <catch2/catch.hpp>

#include <string>

#include "probes/net.hpp"
#include "tests/probes/named_server.hpp"
#include "tests/probes/probe_rig.hpp"

using fo::config::Probe;
using fo::probes::IoWatch;
using fo::probes::UniqueFd;
using fo::test::NamedServer;
using fo::test::ProbeRig;
using Ms = std::chrono::milliseconds;

namespace {

// 300 bytes of TXT in two strings: with the header and question, more than 512 bytes of UDP.
const std::string kBigTxt = std::string(200, 'x') + std::string(200, 'y');

std::string zone() {
  return "www IN A 198.51.100.20\n"
         "www IN A 198.51.100.21\n"
         "v6 IN AAAA 2001:db8::20\n"
         "alias IN CNAME www.failover.test.\n"
         "@ IN MX 10 Mail.failover.test.\n"
         "txt IN TXT \"v=probe1\" \"state=ok\"\n"
         "big IN TXT \"" +
         std::string(200, 'x') + "\" \"" + std::string(200, 'y') +
         "\"\n"
         "big IN TXT \"" +
         std::string(200, 'z') + "\"\n";
}

Probe dns_probe(const std::string& server_ip, int port, const std::string& name,
                const std::string& type = "A") {
  Probe p;
  p.name = "d";
  p.kind = "dns";
  p.dns.server = server_ip + ":" + std::to_string(port);
  p.dns.endpoint = {server_ip, port};
  p.dns.name = name;
  p.dns.type = type;
  p.dns.timeout = Ms(3000);
  return p;
}

// A UDP "server" on the loop that answers every query with a corrupted copy of it.
class BadResponder {
 public:
  enum class Fault { wrong_id, wrong_question };
  BadResponder(sd_event* loop, Fault fault) : fault_(fault) {
    fd_ = UniqueFd(::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    io_ = std::make_unique<IoWatch>(loop, fd_.get(), EPOLLIN, [this](uint32_t) { answer(); });
  }
  int port() const { return port_; }
  int answered() const { return answered_; }

 private:
  void answer() {
    uint8_t buf[512];
    sockaddr_storage from{};
    socklen_t len = sizeof from;
    const ssize_t n =
        ::recvfrom(fd_.get(), buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len);
    if (n < 16) return;
    buf[2] |= 0x80;  // QR: a response
    if (fault_ == Fault::wrong_id)
      buf[1] ^= 0xff;
    else
      buf[n - 3] ^= 0x01;  // QTYPE A (1) becomes 0: another question
    ::sendto(fd_.get(), buf, static_cast<std::size_t>(n), 0, reinterpret_cast<sockaddr*>(&from),
             len);
    ++answered_;
  }
  Fault fault_;
  UniqueFd fd_;
  int port_ = 0;
  int answered_ = 0;
  std::unique_ptr<IoWatch> io_;
};

}  // namespace

TEST_CASE("dns probe against BIND9", "[probes][dns]") {
  NamedServer named(zone());
  ProbeRig rig;
  const int port = named.port();

  SECTION("A record contains the expected address") {
    Probe p = dns_probe("127.0.0.1", port, "www.failover.test.");
    p.dns.expect = "198.51.100.21";
    auto r = rig.run(p);
    INFO(named.log());
    CHECK(r.error.empty());
    CHECK(r.ok);
    CHECK(rig.took_ms < 1000);
  }
  SECTION("A record without the expected address") {
    Probe p = dns_probe("127.0.0.1", port, "www.failover.test.");
    p.dns.expect = "192.0.2.10";
    CHECK(rig.run(p).error == "dns: answer does not contain 192.0.2.10");
  }
  SECTION("names compare case-insensitively, without the trailing dot") {
    Probe p = dns_probe("127.0.0.1", port, "WWW.Failover.Test.");
    CHECK(rig.run(p).ok);
    Probe mx = dns_probe("127.0.0.1", port, "failover.test.", "MX");
    mx.dns.expect = "mail.failover.test";
    CHECK(rig.run(mx).ok);
    mx.dns.expect = "10 mail.failover.test.";
    CHECK(rig.run(mx).ok);
    Probe cname = dns_probe("127.0.0.1", port, "alias.failover.test.", "CNAME");
    cname.dns.expect = "www.failover.test";
    CHECK(rig.run(cname).ok);
  }
  SECTION("AAAA") {
    Probe p = dns_probe("127.0.0.1", port, "v6.failover.test.", "AAAA");
    p.dns.expect = "2001:db8::20";
    CHECK(rig.run(p).ok);
  }
  SECTION("NXDOMAIN") {
    Probe p = dns_probe("127.0.0.1", port, "nope.failover.test.");
    CHECK(rig.run(p).error == "dns: NXDOMAIN");
    p.dns.rcode = "NXDOMAIN";
    CHECK(rig.run(p).ok);
    Probe exists = dns_probe("127.0.0.1", port, "www.failover.test.");
    exists.dns.rcode = "NXDOMAIN";
    CHECK(rig.run(exists).error == "dns: rcode NOERROR, expected NXDOMAIN");
  }
  SECTION("no record of the type") {
    Probe p = dns_probe("127.0.0.1", port, "www.failover.test.", "TXT");
    CHECK(rig.run(p).error == "dns: no TXT record in the answer");
  }
  SECTION("REFUSED outside the zone") {
    Probe p = dns_probe("127.0.0.1", port, "example.org.");
    CHECK(rig.run(p).error == "dns: REFUSED");
  }
  SECTION("TXT: one string or all strings together") {
    Probe p = dns_probe("127.0.0.1", port, "txt.failover.test.", "TXT");
    p.dns.expect = "state=ok";
    CHECK(rig.run(p).ok);
    p.dns.expect = "v=probe1state=ok";
    CHECK(rig.run(p).ok);
    p.dns.expect = "state=down";
    CHECK(rig.run(p).error == "dns: answer does not contain state=down");
  }
  SECTION("a reply too large for UDP is fetched again over TCP") {
    Probe p = dns_probe("127.0.0.1", port, "big.failover.test.", "TXT");
    p.dns.expect = kBigTxt;
    CHECK(rig.run(p).ok);
    // The query log marks queries that came over TCP with T.
    INFO(named.log());
    CHECK(named.log().find("big.failover.test IN TXT +T") != std::string::npos);
  }
  SECTION("server down: connection refused at once") {
    named.stop();
    auto r = rig.run(dns_probe("127.0.0.1", port, "www.failover.test."));
    CHECK(r.error == "dns: connection refused");
    CHECK(rig.took_ms < 1000);
  }
}

TEST_CASE("dns probe: a silent server times out", "[probes][dns]") {
  ProbeRig rig;
  // Bound but never read: the query is queued and nobody answers.
  UniqueFd silent(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(silent.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  ::getsockname(silent.get(), reinterpret_cast<sockaddr*>(&a), &len);
  Probe p = dns_probe("127.0.0.1", ntohs(a.sin_port), "www.failover.test.");
  p.dns.timeout = Ms(300);
  auto r = rig.run(p);
  CHECK(r.error == "dns: timeout after 300 ms");
  CHECK(rig.took_ms >= 290);
  CHECK(rig.took_ms < 1500);
}

TEST_CASE("dns probe: replies with another ID or question are ignored", "[probes][dns]") {
  ProbeRig rig;
  for (auto fault : {BadResponder::Fault::wrong_id, BadResponder::Fault::wrong_question}) {
    BadResponder bad(rig.loop.get(), fault);
    Probe p = dns_probe("127.0.0.1", bad.port(), "www.failover.test.");
    p.dns.timeout = Ms(300);
    auto r = rig.run(p);
    CHECK(bad.answered() == 1);
    CHECK(r.error == "dns: timeout after 300 ms (ignored 1 replies not matching the query)");
  }
}
