// TCP probe on the loop (see tcp_probe.hpp).
#include "probes/tcp/tcp_probe.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "probes/net.hpp"

namespace fo::probes {
namespace {

constexpr std::size_t kMaxExpectShown = 40;
constexpr std::size_t kReadChunk = 16 * 1024;

std::string shown(const std::string& expect) {
  return "\"" + shorten(expect, kMaxExpectShown) + "\"";
}

}  // namespace

struct TcpPlugin::Check {
  enum class Phase { connecting, sending, reading };
  config::TcpProbe spec;  // a copy: a reload must not change a running check
  UniqueFd fd;
  std::unique_ptr<IoWatch> io;
  std::unique_ptr<platform::Timer> timer;
  Phase phase = Phase::connecting;
  std::size_t sent = 0;
  std::string received;
  std::optional<std::string> setup_error;  // reported by the timer, armed to fire at once
  std::function<void(ProbeResult)> done;
};

TcpPlugin::TcpPlugin(sd_event* event) : event_(event) {}
TcpPlugin::~TcpPlugin() = default;

void TcpPlugin::start(const config::Probe& probe, const config::Location& from,
                      std::function<void(ProbeResult)> done) {
  auto check = std::make_unique<Check>();
  Check& c = *check;
  c.spec = probe.tcp;
  c.done = std::move(done);
  const uint64_t id = checks_.add(std::move(check));
  c.timer = std::make_unique<platform::Timer>(event_, [this, id] { on_timeout(id); });
  auto fail_soon = [&](std::string why) {
    c.setup_error = std::move(why);
    c.timer->arm_in(platform::Millis(0));
  };
  SockAddr to;
  if (!make_sockaddr(c.spec.endpoint.host, c.spec.endpoint.port, to))
    return fail_soon("invalid address " + c.spec.address);
  Connect conn = start_connect(to, SOCK_STREAM, from);
  if (!conn.error.empty()) return fail_soon(conn.error);
  c.fd = std::move(conn.fd);
  c.io =
      std::make_unique<IoWatch>(event_, c.fd.get(), EPOLLOUT, [this, id](uint32_t) { on_io(id); });
  if (!c.io->ok()) return fail_soon("cannot watch socket");
  c.timer->arm_in(c.spec.timeout);
}

void TcpPlugin::on_io(uint64_t id) {
  Check* c = checks_.find(id);
  if (!c) return;
  auto fail = [&](std::string why) { checks_.finish(id, ProbeResult::failure(std::move(why))); };
  auto succeed = [&] { checks_.finish(id, ProbeResult::success()); };
  if (c->phase == Check::Phase::connecting) {
    if (int err = socket_error(c->fd.get()); err != 0) return fail(errno_phrase(err));
    if (c->spec.send.empty()) {
      if (c->spec.expect.empty()) return succeed();
      c->phase = Check::Phase::reading;
      c->io->set_events(EPOLLIN);
      return;
    }
    c->phase = Check::Phase::sending;
  }
  if (c->phase == Check::Phase::sending) {
    while (c->sent < c->spec.send.size()) {
      const ssize_t n = ::send(c->fd.get(), c->spec.send.data() + c->sent,
                               c->spec.send.size() - c->sent, MSG_NOSIGNAL);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;  // wait for EPOLLOUT again
      if (n < 0) return fail("send failed: " + errno_phrase(errno));
      c->sent += static_cast<std::size_t>(n);
    }
    if (c->spec.expect.empty()) return succeed();
    c->phase = Check::Phase::reading;
    c->io->set_events(EPOLLIN);
    return;  // read on the next readable event
  }
  char buf[kReadChunk];
  while (true) {
    const std::size_t room = std::min(sizeof buf, c->spec.max_read - c->received.size());
    const ssize_t n = ::recv(c->fd.get(), buf, room, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n < 0)
      return fail(errno_phrase(errno) + " before " + shown(c->spec.expect) + " was received");
    if (n == 0)
      return fail("connection closed before " + shown(c->spec.expect) + " was received (read " +
                  std::to_string(c->received.size()) + " bytes)");
    c->received.append(buf, static_cast<std::size_t>(n));
    if (c->received.find(c->spec.expect) != std::string::npos) return succeed();
    if (c->received.size() >= c->spec.max_read)
      return fail(shown(c->spec.expect) + " not in the first " + std::to_string(c->spec.max_read) +
                  " bytes");
  }
}

void TcpPlugin::on_timeout(uint64_t id) {
  Check* c = checks_.find(id);
  if (!c) return;
  if (c->setup_error) return checks_.finish(id, ProbeResult::failure(*c->setup_error));
  std::string what = "timeout after " + std::to_string(c->spec.timeout.count()) + " ms";
  switch (c->phase) {
    case Check::Phase::connecting:
      what += " connecting";
      break;
    case Check::Phase::sending:
      what += " sending";
      break;
    case Check::Phase::reading:
      what += " waiting for " + shown(c->spec.expect) + " (read " +
              std::to_string(c->received.size()) + " bytes)";
      break;
  }
  checks_.finish(id, ProbeResult::failure(what));
}

}  // namespace fo::probes
