// TCP probe against an in-test listener on the same sd-event loop: connect, send/expect,
// refused port, silent peer, read cap, source address.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <list>
#include <memory>
#include <string>

#include "probes/net.hpp"
#include "tests/probes/probe_rig.hpp"

using fo::config::Location;
using fo::config::Probe;
using fo::probes::IoWatch;
using fo::probes::UniqueFd;
using fo::test::ProbeRig;
using Ms = std::chrono::milliseconds;

namespace {

// What the listener does with each connection.
struct Script {
  bool accept = true;    // false: never accept (the kernel still completes the handshake)
  std::string banner;    // written right after accept
  std::string wait_for;  // then, once this was received ...
  std::string reply;     // ... this is written
  bool close_after = false;
};

class TcpServer {
 public:
  TcpServer(sd_event* loop, Script script, const char* ip = "127.0.0.1")
      : loop_(loop), script_(std::move(script)) {
    fo::probes::SockAddr addr;
    REQUIRE(fo::probes::make_sockaddr(ip, 0, addr));
    fd_ = UniqueFd(::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    REQUIRE(::bind(fd_.get(), addr.get(), addr.len) == 0);
    REQUIRE(::listen(fd_.get(), 16) == 0);
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&ss), &len);
    port_ = ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                          : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
    if (script_.accept)
      watch_ = std::make_unique<IoWatch>(loop_, fd_.get(), EPOLLIN, [this](uint32_t) { accept(); });
  }
  int port() const { return port_; }
  std::string received() const { return conns_.empty() ? "" : conns_.back().in; }

 private:
  struct Conn {
    UniqueFd fd;
    std::string in;
    bool replied = false;
    std::unique_ptr<IoWatch> io;
  };
  void accept() {
    int c = ::accept4(fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) return;
    conns_.push_back(Conn{UniqueFd(c), "", false, nullptr});
    Conn& conn = conns_.back();
    if (!script_.banner.empty()) send_all(conn, script_.banner);
    conn.io = std::make_unique<IoWatch>(loop_, c, EPOLLIN, [this, &conn](uint32_t) { read(conn); });
  }
  void read(Conn& conn) {
    char buf[4096];
    ssize_t n = ::recv(conn.fd.get(), buf, sizeof buf, 0);
    if (n <= 0) {
      conn.io.reset();
      return;
    }
    conn.in.append(buf, static_cast<std::size_t>(n));
    if (!conn.replied && !script_.wait_for.empty() &&
        conn.in.find(script_.wait_for) != std::string::npos) {
      conn.replied = true;
      send_all(conn, script_.reply);
      if (script_.close_after) {
        conn.io.reset();
        conn.fd.reset();
      }
    }
  }
  static void send_all(Conn& conn, const std::string& data) {
    REQUIRE(::send(conn.fd.get(), data.data(), data.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(data.size()));
  }

  sd_event* loop_;
  Script script_;
  UniqueFd fd_;
  int port_ = 0;
  std::unique_ptr<IoWatch> watch_;
  std::list<Conn> conns_;
};

Probe tcp_probe(const std::string& host, int port) {
  Probe p;
  p.name = "t";
  p.kind = "tcp";
  p.tcp.address = host + ":" + std::to_string(port);
  p.tcp.endpoint = {host, port};
  p.tcp.timeout = Ms(3000);
  return p;
}

}  // namespace

TEST_CASE("tcp probe: a connect alone is enough without send/expect", "[probes][tcp]") {
  ProbeRig rig;
  TcpServer server(rig.loop.get(), Script{false, "", "", "", false});
  auto r = rig.run(tcp_probe("127.0.0.1", server.port()));
  CHECK(r.ok);
  CHECK(r.error.empty());
}

TEST_CASE("tcp probe: send, then expect a substring of the reply", "[probes][tcp]") {
  ProbeRig rig;
  TcpServer server(rig.loop.get(), Script{true, "", "PING\n", "+PONG ready\n", false});
  Probe p = tcp_probe("127.0.0.1", server.port());
  p.tcp.send = "PING\n";
  p.tcp.expect = "PONG";
  auto r = rig.run(p);
  CHECK(r.ok);
  CHECK(server.received() == "PING\n");
}

TEST_CASE("tcp probe: expect a banner without sending", "[probes][tcp]") {
  ProbeRig rig;
  TcpServer server(rig.loop.get(), Script{true, "220 mail ESMTP\r\n", "", "", false});
  Probe p = tcp_probe("127.0.0.1", server.port());
  p.tcp.expect = "220 ";
  CHECK(rig.run(p).ok);
}

TEST_CASE("tcp probe: wrong reply and close", "[probes][tcp]") {
  ProbeRig rig;
  TcpServer server(rig.loop.get(), Script{true, "", "PING\n", "NOPE\n", true});
  Probe p = tcp_probe("127.0.0.1", server.port());
  p.tcp.send = "PING\n";
  p.tcp.expect = "PONG";
  auto r = rig.run(p);
  CHECK_FALSE(r.ok);
  CHECK(r.error == "tcp: connection closed before \"PONG\" was received (read 5 bytes)");
}

TEST_CASE("tcp probe: refused port", "[probes][tcp]") {
  ProbeRig rig;
  auto r = rig.run(tcp_probe("127.0.0.1", fo::test::unused_port()));
  CHECK_FALSE(r.ok);
  CHECK(r.error == "tcp: connection refused");
  CHECK(rig.took_ms < 1000);
}

TEST_CASE("tcp probe: a silent peer times out", "[probes][tcp]") {
  ProbeRig rig;
  TcpServer server(rig.loop.get(), Script{true, "", "never", "", false});
  Probe p = tcp_probe("127.0.0.1", server.port());
  p.tcp.send = "HELLO\n";
  p.tcp.expect = "WELCOME";
  p.tcp.timeout = Ms(300);
  auto r = rig.run(p);
  CHECK_FALSE(r.ok);
  CHECK(r.error == "tcp: timeout after 300 ms waiting for \"WELCOME\" (read 0 bytes)");
  CHECK(rig.took_ms >= 290);
  CHECK(rig.took_ms < 1500);
}

TEST_CASE("tcp probe: at most max_read bytes are read", "[probes][tcp]") {
  ProbeRig rig;
  TcpServer server(rig.loop.get(), Script{true, std::string(1000, 'x'), "", "", false});
  Probe p = tcp_probe("127.0.0.1", server.port());
  p.tcp.expect = "OK";
  p.tcp.max_read = 64;
  auto r = rig.run(p);
  CHECK(r.error == "tcp: \"OK\" not in the first 64 bytes");
}

TEST_CASE("tcp probe: IPv6 loopback and the location's source address", "[probes][tcp]") {
  ProbeRig rig;
  TcpServer v4(rig.loop.get(), Script{false, "", "", "", false});
  Location from;
  from.name = "loc";
  from.source_address = "127.0.0.1";
  CHECK(rig.run(tcp_probe("127.0.0.1", v4.port()), from).ok);

  Location v6_source;
  v6_source.source_address = "::1";
  auto r = rig.run(tcp_probe("127.0.0.1", v4.port()), v6_source);
  CHECK(r.error == "tcp: source address ::1 is not of the target's family");

  TcpServer v6(rig.loop.get(), Script{false, "", "", "", false}, "::1");
  CHECK(rig.run(tcp_probe("::1", v6.port())).ok);
}

TEST_CASE("tcp probe: many checks at once on one loop", "[probes][tcp]") {
  ProbeRig rig;
  TcpServer server(rig.loop.get(), Script{true, "", "PING\n", "PONG\n", false});
  Probe p = tcp_probe("127.0.0.1", server.port());
  p.tcp.send = "PING\n";
  p.tcp.expect = "PONG";
  int ok = 0, calls = 0;
  for (int i = 0; i < 50; ++i)
    rig.dispatcher.start(p, {}, [&](fo::probes::ProbeResult r) {
      ++calls;
      ok += r.ok ? 1 : 0;
    });
  CHECK(rig.dispatcher.in_flight() == 50);
  REQUIRE(fo::test::run_until(rig.loop.get(), [&] { return calls == 50; }));
  CHECK(ok == 50);
  CHECK(rig.dispatcher.in_flight() == 0);
}
