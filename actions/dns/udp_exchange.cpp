// One DNS request over UDP on the loop (see udp_exchange.hpp).
#include "actions/dns/udp_exchange.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>

#include "probes/dns/ldns_util.hpp"

namespace fo::actions::dns {

using probes::dns::kMaxDnsMessage;
using probes::dns::kMaxIgnoredReplies;

UdpExchange::UdpExchange(sd_event* event, const config::DnsServer& server,
                         const std::vector<uint8_t>& wire, uint16_t id, core::Millis timeout,
                         Done done)
    : id_(id), timeout_(timeout), done_(std::move(done)) {
  timer_ = std::make_unique<platform::Timer>(event, [this] {
    if (!setup_error_.empty()) return finish({false, false, {}, setup_error_});
    finish({false, true, {}, "no reply within " + std::to_string(timeout_.count()) + " ms"});
  });
  auto fail_soon = [&](std::string why) {
    setup_error_ = std::move(why);
    timer_->arm_in(core::Millis(0));
  };
  probes::SockAddr to;
  if (wire.empty()) {
    fail_soon("nothing to send");
    return;
  }
  if (!probes::make_sockaddr(server.host, server.port, to)) {
    fail_soon("invalid server address " + server.text);
    return;
  }
  probes::Connect conn = probes::start_connect(to, SOCK_DGRAM, config::Location{});
  if (!conn.error.empty()) {
    fail_soon(conn.error);
    return;
  }
  fd_ = std::move(conn.fd);
  if (::send(fd_.get(), wire.data(), wire.size(), MSG_NOSIGNAL) < 0) {
    fail_soon(probes::errno_phrase(errno));
    return;
  }
  io_ = std::make_unique<probes::IoWatch>(event, fd_.get(), EPOLLIN,
                                          [this](uint32_t) { on_readable(); });
  if (!io_->ok()) {
    fail_soon("cannot watch the socket");
    return;
  }
  timer_->arm_in(timeout_);
}

void UdpExchange::on_readable() {
  std::vector<uint8_t> buf(kMaxDnsMessage);
  while (true) {
    const ssize_t n = ::recv(fd_.get(), buf.data(), buf.size(), 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n < 0) return finish({false, false, {}, probes::errno_phrase(errno)});
    const bool ours = n >= 12 && ((uint16_t(buf[0]) << 8) | buf[1]) == id_ && (buf[2] & 0x80);
    if (!ours) {
      if (++ignored_ > kMaxIgnoredReplies)
        return finish({false, false, {}, "too many replies not matching the request"});
      continue;
    }
    buf.resize(static_cast<std::size_t>(n));
    return finish({true, false, std::move(buf), ""});
  }
}

void UdpExchange::finish(Exchanged result) {
  if (!done_) return;
  io_.reset();
  fd_.reset();
  timer_->disarm();
  Done done = std::move(done_);
  done_ = nullptr;
  done(std::move(result));  // may destroy *this
}

}  // namespace fo::actions::dns
