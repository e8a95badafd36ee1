// DNS probe I/O on the loop (see dns_probe.hpp).
#include "probes/dns/dns_probe.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <optional>
#include <vector>

#include "probes/dns/dns_message.hpp"
#include "probes/dns/ldns_util.hpp"
#include "probes/net.hpp"

namespace fo::probes {

using dns::kMaxDnsMessage;
using dns::kMaxIgnoredReplies;

struct DnsPlugin::Check {
  enum class Phase { udp, tcp_connecting, tcp_sending, tcp_reading };
  config::DnsProbe spec;
  config::Location from;
  dns::Query query;
  SockAddr server;
  UniqueFd fd;
  std::unique_ptr<IoWatch> io;
  std::unique_ptr<platform::Timer> timer;
  Phase phase = Phase::udp;
  std::vector<uint8_t> out;  // TCP: length-prefixed query
  std::size_t sent = 0;
  std::vector<uint8_t> in;  // TCP: length prefix and message
  int ignored = 0;
  std::optional<std::string> setup_error;
  std::function<void(ProbeResult)> done;
};

DnsPlugin::DnsPlugin(sd_event* event) : event_(event) {}
DnsPlugin::~DnsPlugin() = default;

void DnsPlugin::start(const config::Probe& probe, const config::Location& from,
                      std::function<void(ProbeResult)> done) {
  auto check = std::make_unique<Check>();
  Check& c = *check;
  c.spec = probe.dns;
  c.from = from;
  c.done = std::move(done);
  const uint64_t id = checks_.add(std::move(check));
  c.timer = std::make_unique<platform::Timer>(event_, [this, id] { on_timeout(id); });
  auto fail_soon = [&](std::string why) {
    c.setup_error = std::move(why);
    c.timer->arm_in(platform::Millis(0));
  };
  c.query = dns::build_query(c.spec);
  if (!c.query.error.empty()) return fail_soon(c.query.error);
  if (!make_sockaddr(c.spec.endpoint.host, c.spec.endpoint.port, c.server))
    return fail_soon("invalid server " + c.spec.server);
  // A connected UDP socket: replies from other addresses never reach us, and an ICMP port
  // unreachable comes back as ECONNREFUSED instead of a silent timeout.
  Connect conn = start_connect(c.server, SOCK_DGRAM, from);
  if (!conn.error.empty()) return fail_soon(conn.error);
  c.fd = std::move(conn.fd);
  if (::send(c.fd.get(), c.query.wire.data(), c.query.wire.size(), MSG_NOSIGNAL) < 0)
    return fail_soon("send failed: " + errno_phrase(errno));
  c.io =
      std::make_unique<IoWatch>(event_, c.fd.get(), EPOLLIN, [this, id](uint32_t) { on_udp(id); });
  if (!c.io->ok()) return fail_soon("cannot watch socket");
  c.timer->arm_in(c.spec.timeout);
}

void DnsPlugin::on_udp(uint64_t id) {
  Check* c = checks_.find(id);
  if (!c) return;
  std::vector<uint8_t> buf(kMaxDnsMessage);
  while (true) {
    const ssize_t n = ::recv(c->fd.get(), buf.data(), buf.size(), 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n < 0) return checks_.finish(id, ProbeResult::failure(errno_phrase(errno)));
    dns::Reply reply =
        dns::judge_reply(c->spec, c->query.id, buf.data(), static_cast<std::size_t>(n));
    if (reply.fit != dns::Reply::Fit::matches) {
      if (++c->ignored > kMaxIgnoredReplies)
        return checks_.finish(id, ProbeResult::failure("too many replies not matching the query"));
      continue;
    }
    if (reply.truncated) return switch_to_tcp(id);
    return checks_.finish(id, std::move(reply.result));
  }
}

void DnsPlugin::switch_to_tcp(uint64_t id) {
  Check* c = checks_.find(id);
  c->io.reset();
  c->fd.reset();
  Connect conn = start_connect(c->server, SOCK_STREAM, c->from);
  if (!conn.error.empty())
    return checks_.finish(id, ProbeResult::failure(conn.error + " (over tcp)"));
  c->fd = std::move(conn.fd);
  c->phase = Check::Phase::tcp_connecting;
  const std::size_t len = c->query.wire.size();
  c->out = {static_cast<uint8_t>(len >> 8), static_cast<uint8_t>(len & 0xff)};
  c->out.insert(c->out.end(), c->query.wire.begin(), c->query.wire.end());
  c->io = std::make_unique<IoWatch>(event_, c->fd.get(), EPOLLOUT,
                                    [this, id](uint32_t) { on_tcp(id); });
  if (!c->io->ok()) return checks_.finish(id, ProbeResult::failure("cannot watch socket"));
}

void DnsPlugin::on_tcp(uint64_t id) {
  Check* c = checks_.find(id);
  if (!c) return;
  auto fail = [&](std::string why) {
    checks_.finish(id, ProbeResult::failure(why + " (over tcp)"));
  };
  if (c->phase == Check::Phase::tcp_connecting) {
    if (int err = socket_error(c->fd.get()); err != 0) return fail(errno_phrase(err));
    c->phase = Check::Phase::tcp_sending;
  }
  if (c->phase == Check::Phase::tcp_sending) {
    while (c->sent < c->out.size()) {
      const ssize_t n =
          ::send(c->fd.get(), c->out.data() + c->sent, c->out.size() - c->sent, MSG_NOSIGNAL);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      if (n < 0) return fail("send failed: " + errno_phrase(errno));
      c->sent += static_cast<std::size_t>(n);
    }
    c->phase = Check::Phase::tcp_reading;
    c->io->set_events(EPOLLIN);
    return;
  }
  uint8_t buf[4096];
  while (true) {
    std::size_t want = 2;
    if (c->in.size() >= 2) want = 2 + ((std::size_t(c->in[0]) << 8) | c->in[1]);
    const std::size_t room = std::min(sizeof buf, want - c->in.size());
    const ssize_t n = ::recv(c->fd.get(), buf, room, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n < 0) return fail(errno_phrase(errno));
    if (n == 0) return fail("connection closed before the reply was complete");
    c->in.insert(c->in.end(), buf, buf + n);
    if (c->in.size() < 2) continue;
    want = 2 + ((std::size_t(c->in[0]) << 8) | c->in[1]);
    if (c->in.size() < want) continue;
    dns::Reply reply = dns::judge_reply(c->spec, c->query.id, c->in.data() + 2, want - 2);
    // Over TCP nobody else can answer: a reply that does not fit is the server's fault.
    if (reply.fit == dns::Reply::Fit::unparsable) return fail("unparsable reply");
    if (reply.fit == dns::Reply::Fit::other_query) return fail("reply does not match the query");
    if (reply.truncated) return fail("reply truncated");
    return checks_.finish(id, std::move(reply.result));
  }
}

void DnsPlugin::on_timeout(uint64_t id) {
  Check* c = checks_.find(id);
  if (!c) return;
  if (c->setup_error) return checks_.finish(id, ProbeResult::failure(*c->setup_error));
  std::string what = "timeout after " + std::to_string(c->spec.timeout.count()) + " ms";
  if (c->phase != Check::Phase::udp) what += " (over tcp)";
  if (c->ignored > 0)
    what += " (ignored " + std::to_string(c->ignored) + " replies not matching the query)";
  checks_.finish(id, ProbeResult::failure(what));
}

}  // namespace fo::probes
