// Socket plumbing shared by the probe kinds that do their own I/O on the loop (tcp, dns):
// an fd owner, an sd-event io watch, address literals and a non-blocking connect from a
// location's source address or interface.
#pragma once

#include <sys/socket.h>
#include <systemd/sd-event.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "daemon/config/config.hpp"
#include "daemon/platform/event.hpp"
#include "daemon/platform/unique_fd.hpp"

namespace fo::probes {

using platform::UniqueFd;

struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;
  int family() const { return storage.ss_family; }
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

// From an IP literal (no brackets) and a port; false if `ip` is no address.
bool make_sockaddr(const std::string& ip, int port, SockAddr& out);

// An io event source calling `on_event(revents)`; destroying it (also from its own callback)
// stops it.
class IoWatch {
 public:
  IoWatch(sd_event* event, int fd, uint32_t events, std::function<void(uint32_t)> on_event);
  IoWatch(const IoWatch&) = delete;
  IoWatch& operator=(const IoWatch&) = delete;
  bool ok() const { return source_ != nullptr; }
  void set_events(uint32_t events);

 private:
  static int dispatch(sd_event_source* s, int fd, uint32_t revents, void* userdata);
  std::function<void(uint32_t)> on_event_;
  platform::SourcePtr source_;
};

struct Connect {
  UniqueFd fd;
  std::string error;  // "" when the connect is under way (or done, for UDP)
};

// A non-blocking, close-on-exec socket of `type` (SOCK_STREAM / SOCK_DGRAM), bound to the
// location's source address and interface if set, connecting to `to`.
Connect start_connect(const SockAddr& to, int type, const config::Location& from);

// The pending error of a connecting socket (SO_ERROR), 0 when connected.
int socket_error(int fd);

// Short phrase for an errno from connect/send/recv: "connection refused", "connection reset",
// "network unreachable", otherwise strerror in lower case.
std::string errno_phrase(int err);

// `text` cut to `limit` bytes ("..." appended), control characters shown as spaces.
std::string shorten(std::string_view text, std::size_t limit);

}  // namespace fo::probes
