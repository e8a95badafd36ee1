// Test helper: one sd-event loop with the daemon's probe plumbing (CurlMulti, ExecRunner,
// ProbeDispatcher); run() starts one check and returns its single result.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <string>

#include "actions/exec/exec_runner.hpp"
#include "daemon/platform/curl_multi.hpp"
#include "probes/dispatcher.hpp"
#include "tests/platform/loop_util.hpp"

namespace fo::test {

struct ProbeRig {
  platform::EventPtr loop = platform::make_event();
  platform::CurlMulti curl{loop.get()};
  actions::ExecRunner exec{loop.get()};
  probes::ProbeDispatcher dispatcher{loop.get(), curl, exec};
  double took_ms = 0;

  probes::ProbeResult run(const config::Probe& probe, const config::Location& from = {},
                          std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    std::optional<probes::ProbeResult> result;
    int calls = 0;
    const auto t0 = std::chrono::steady_clock::now();
    dispatcher.start(probe, from, [&](probes::ProbeResult r) {
      ++calls;
      result = std::move(r);
    });
    REQUIRE(calls == 0);  // never synchronous
    REQUIRE(dispatcher.in_flight() == 1);
    REQUIRE(run_until(
        loop.get(), [&] { return calls > 0; }, limit));
    took_ms = ms_since(t0);
    for (int i = 0; i < 3; ++i) sd_event_run(loop.get(), 1000);  // no second call follows
    REQUIRE(calls == 1);
    REQUIRE(dispatcher.in_flight() == 0);
    CHECK(result->latency_ms > 0);
    CHECK(result->ok == result->error.empty());
    return *result;
  }
};

// A port on 127.0.0.1 that nothing listens on (bound, read, released).
inline int unused_port(int type = SOCK_STREAM) {
  const int fd = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A port free for both TCP and UDP on 127.0.0.1 (servers like named need both).
inline int unused_port_tcp_udp() {
  for (int attempt = 0; attempt < 50; ++attempt) {
    const int port = unused_port(SOCK_STREAM);
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (free) return port;
  }
  FAIL("no port free for both TCP and UDP");
  return 0;
}

}  // namespace fo::test
