// Socket plumbing for the probe kinds (see net.hpp).
#include "probes/net.hpp"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace fo::probes {

bool make_sockaddr(const std::string& ip, int port, SockAddr& out) {
  out = SockAddr{};
  if (port < 0 || port > 65535) return false;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
  if (inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    out.len = sizeof(sockaddr_in);
    return true;
  }
  if (inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    out.len = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}

IoWatch::IoWatch(sd_event* event, int fd, uint32_t events, std::function<void(uint32_t)> on_event)
    : on_event_(std::move(on_event)) {
  sd_event_source* s = nullptr;
  if (sd_event_add_io(event, &s, fd, events, &IoWatch::dispatch, this) >= 0) source_.reset(s);
}

void IoWatch::set_events(uint32_t events) {
  if (source_) sd_event_source_set_io_events(source_.get(), events);
}

int IoWatch::dispatch(sd_event_source*, int, uint32_t revents, void* userdata) {
  // The callback may destroy *this: keep the function alive on the stack.
  auto fn = static_cast<IoWatch*>(userdata)->on_event_;
  fn(revents);
  return 0;
}

Connect start_connect(const SockAddr& to, int type, const config::Location& from) {
  Connect c;
  c.fd = UniqueFd(::socket(to.family(), type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!c.fd) {
    c.error = "cannot create socket: " + errno_phrase(errno);
    return c;
  }
  if (!from.interface.empty() &&
      setsockopt(c.fd.get(), SOL_SOCKET, SO_BINDTODEVICE, from.interface.c_str(),
                 static_cast<socklen_t>(from.interface.size())) != 0) {
    c.error = "cannot bind to interface " + from.interface + ": " + errno_phrase(errno);
    return c;
  }
  if (!from.source_address.empty()) {
    SockAddr src;
    if (!make_sockaddr(from.source_address, 0, src)) {
      c.error = "invalid source address " + from.source_address;
      return c;
    }
    if (src.family() != to.family()) {
      c.error = "source address " + from.source_address + " is not of the target's family";
      return c;
    }
    if (::bind(c.fd.get(), src.get(), src.len) != 0) {
      c.error = "cannot bind source " + from.source_address + ": " + errno_phrase(errno);
      return c;
    }
  }
  if (::connect(c.fd.get(), to.get(), to.len) != 0 && errno != EINPROGRESS)
    c.error = errno_phrase(errno);
  return c;
}

int socket_error(int fd) {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

std::string errno_phrase(int err) {
  switch (err) {
    case ECONNREFUSED:
      return "connection refused";
    case ECONNRESET:
      return "connection reset";
    case ENETUNREACH:
      return "network unreachable";
    case EHOSTUNREACH:
      return "host unreachable";
    case ETIMEDOUT:
      return "connection timed out";
    case EPIPE:
      return "connection closed by peer";
    default:
      break;
  }
  std::string text = std::strerror(err);
  if (!text.empty() && text[0] >= 'A' && text[0] <= 'Z') text[0] = static_cast<char>(text[0] + 32);
  return text;
}

std::string shorten(std::string_view text, std::size_t limit) {
  std::string out(text.substr(0, limit));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  if (text.size() > limit) out += "...";
  return out;
}

}  // namespace fo::probes
