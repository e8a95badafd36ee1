// Blocking control-protocol client (see client.hpp).
#include "daemon/control/client.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <thread>

#include "daemon/control/protocol.hpp"

namespace fo::control {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

class Socket {
 public:
  Socket() : fd_(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

std::string connect_hint(int err) {
  switch (err) {
    case ENOENT:
    case ECONNREFUSED:
      return " (is failoverd running?)";
    case EACCES:
    case EPERM:
      return " (the socket is mode 0660: run as root or as a member of its group)";
    default:
      return "";
  }
}

[[noreturn]] void timed_out(std::chrono::milliseconds timeout) {
  throw ControlError(ControlError::Kind::timeout,
                     "timed out after " + std::to_string(timeout.count()) + " ms");
}

// Waits for `events` on fd until the deadline. Returns the revents.
short wait_for(int fd, short events, Clock::time_point deadline,
               std::chrono::milliseconds timeout) {
  for (;;) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) timed_out(timeout);
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, int(std::min<int64_t>(left.count(), 60000)));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw ControlError(ControlError::Kind::io,
                         std::string("poll failed: ") + std::strerror(errno));
    }
    if (r > 0) return p.revents;
  }
}

}  // namespace

json call(const std::string& path, const json& request, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  sockaddr_un address{};
  if (path.empty() || path.size() >= sizeof address.sun_path) {
    throw ControlError(ControlError::Kind::connect,
                       "cannot connect to " + path + ": invalid socket path");
  }
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());

  Socket sock;
  if (sock.fd() < 0) {
    throw ControlError(ControlError::Kind::io,
                       std::string("cannot create socket: ") + std::strerror(errno));
  }
  for (;;) {
    if (::connect(sock.fd(), reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0) {
      break;
    }
    const int err = errno;
    if (err == EINTR) continue;
    // AF_UNIX connect says EAGAIN when the listen backlog is full; the daemon may drain it soon.
    if (err == EAGAIN) {
      if (Clock::now() >= deadline) timed_out(timeout);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    throw ControlError(ControlError::Kind::connect,
                       "cannot connect to " + path + ": " + std::strerror(err) + connect_hint(err));
  }

  const std::string line = to_line(request);
  std::size_t sent = 0;
  while (sent < line.size()) {
    ssize_t n = ::send(sock.fd(), line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n >= 0) {
      sent += std::size_t(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait_for(sock.fd(), POLLOUT, deadline, timeout);
      continue;
    }
    // The daemon may have answered and closed early (e.g. "request too large"): read on.
    if (errno == EPIPE || errno == ECONNRESET) break;
    throw ControlError(ControlError::Kind::io,
                       "cannot send to " + path + ": " + std::strerror(errno));
  }

  std::string in;
  char buffer[65536];
  for (;;) {
    ssize_t n = ::recv(sock.fd(), buffer, sizeof buffer, 0);
    if (n > 0) {
      const std::size_t old_size = in.size();
      in.append(buffer, std::size_t(n));
      if (auto nl = in.find('\n', old_size); nl != std::string::npos) {
        in.resize(nl);
        break;
      }
      if (in.size() > kMaxReplyBytes) {
        throw ControlError(
            ControlError::Kind::malformed,
            "malformed reply: larger than " + std::to_string(kMaxReplyBytes) + " bytes");
      }
      continue;
    }
    if (n == 0) break;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait_for(sock.fd(), POLLIN, deadline, timeout);
      continue;
    }
    if (errno == ECONNRESET && !in.empty()) break;
    throw ControlError(ControlError::Kind::io,
                       "cannot read the reply from " + path + ": " + std::strerror(errno));
  }
  if (in.empty()) {
    throw ControlError(ControlError::Kind::malformed,
                       "malformed reply: the daemon closed the connection without answering");
  }
  json reply = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (reply.is_discarded() || !reply.is_object()) {
    throw ControlError(ControlError::Kind::malformed, "malformed reply: not a JSON object");
  }
  if (auto result = reply.find("result"); result == reply.end() || !result->is_number_integer()) {
    throw ControlError(ControlError::Kind::malformed, "malformed reply: no integer \"result\"");
  }
  return reply;
}

}  // namespace fo::control
