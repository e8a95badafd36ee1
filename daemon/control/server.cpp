// Control socket server on sd-event (see server.hpp and docs/control-protocol.md).
#include "daemon/control/server.hpp"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <variant>

#include "daemon/platform/unique_fd.hpp"

namespace fo::control {

using nlohmann::json;
using platform::UniqueFd;

namespace {

// Bounded so one busy wake-up cannot starve the rest of the loop.
constexpr int kMaxAcceptsPerWakeup = 64;
constexpr uint64_t kTimerAccuracyUsec = 1000;  // 0 would mean 250 ms of slack

std::string errno_text(int err) {
  return std::strerror(err);
}

sockaddr_un make_address(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  return address;
}

uint64_t monotonic_usec() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000u + uint64_t(ts.tv_nsec) / 1000u;
}

// A socket file exists at `path`: is a daemon behind it, or is it left over from a crash?
void remove_stale_socket(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw std::runtime_error("cannot inspect control socket " + path + ": " + errno_text(errno));
  }
  if (!S_ISSOCK(st.st_mode)) {
    throw std::runtime_error("control socket path " + path +
                             " exists and is not a socket; refusing to replace it");
  }
  UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (probe.get() < 0) {
    throw std::runtime_error("cannot create socket: " + errno_text(errno));
  }
  sockaddr_un address = make_address(path);
  if (::connect(probe.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0) {
    throw std::runtime_error("another failoverd is running on " + path);
  }
  const int err = errno;
  if (err == ENOENT) return;  // vanished meanwhile
  // EAGAIN: a listener with a full backlog is still a listener.
  if (err == EAGAIN) throw std::runtime_error("another failoverd is running on " + path);
  if (err != ECONNREFUSED) {
    throw std::runtime_error("cannot check existing control socket " + path + ": " +
                             errno_text(err));
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    throw std::runtime_error("cannot remove stale control socket " + path + ": " +
                             errno_text(errno));
  }
  spdlog::info("removed stale control socket {}", path);
}

}  // namespace

struct ControlServer::Connection {
  ControlServer* server = nullptr;
  uint64_t id = 0;
  UniqueFd fd;
  Peer peer;
  EventSourcePtr io;
  EventSourcePtr timer;
  std::string in;
  std::string out;
  std::size_t written = 0;
  bool replying = false;

  explicit Connection(int f) : fd(f) {}
  ~Connection() {
    // Sources leave epoll before the fd is closed (members are destroyed in reverse order,
    // but make it explicit).
    io.reset();
    timer.reset();
  }
};

ControlServer::ControlServer(sd_event* event, std::string path, Handler handler, Limits limits)
    : event_(sd_event_ref(event)),
      path_(std::move(path)),
      handler_(std::move(handler)),
      limits_(limits) {
  if (!event_) throw std::invalid_argument("ControlServer needs an sd_event loop");
  if (!handler_) throw std::invalid_argument("ControlServer needs a handler");
  if (path_.empty()) throw std::runtime_error("control socket path is empty");
  if (path_.size() >= sizeof(sockaddr_un{}.sun_path)) {
    throw std::runtime_error("control socket path is too long (" + std::to_string(path_.size()) +
                             " bytes, at most " +
                             std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) + "): " + path_);
  }
  if (limits_.max_request_bytes == 0 || limits_.max_connections == 0 ||
      limits_.request_timeout.count() <= 0 || limits_.reply_timeout.count() <= 0) {
    throw std::invalid_argument("ControlServer limits must be positive");
  }

  remove_stale_socket(path_);

  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) throw std::runtime_error("cannot create control socket: " + errno_text(errno));
  sockaddr_un address = make_address(path_);
  // The socket file's mode is the access control: owner and group may connect (0660).
  const mode_t old_umask = ::umask(0117);
  const int bound = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address);
  const int bind_errno = errno;
  ::umask(old_umask);
  if (bound != 0) {
    throw std::runtime_error("cannot bind control socket " + path_ + ": " + errno_text(bind_errno));
  }
  try {
    if (::listen(fd.get(), SOMAXCONN) != 0) {
      throw std::runtime_error("cannot listen on control socket " + path_ + ": " +
                               errno_text(errno));
    }
    struct stat st {};
    if (::stat(path_.c_str(), &st) == 0) {
      socket_dev_ = st.st_dev;
      socket_ino_ = st.st_ino;
    }
    sd_event_source* source = nullptr;
    int r =
        sd_event_add_io(event_.get(), &source, fd.get(), EPOLLIN, &ControlServer::on_listen, this);
    if (r < 0) {
      throw std::runtime_error("cannot watch control socket " + path_ + ": " + errno_text(-r));
    }
    listen_source_.reset(source);
  } catch (...) {
    ::unlink(path_.c_str());
    throw;
  }
  listen_fd_ = fd.release();
  spdlog::info("control socket listening on {}", path_);
}

ControlServer::~ControlServer() {
  connections_.clear();
  listen_source_.reset();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  // Unlink only our own file: a successor may already have replaced it.
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0 && st.st_dev == socket_dev_ && st.st_ino == socket_ino_) {
    ::unlink(path_.c_str());
  }
}

uint64_t ControlServer::deadline_after(std::chrono::milliseconds d) const {
  return monotonic_usec() + uint64_t(d.count()) * 1000u;
}

int ControlServer::on_listen(sd_event_source*, int, uint32_t, void* userdata) {
  static_cast<ControlServer*>(userdata)->accept_pending();
  return 0;
}

void ControlServer::accept_pending() {
  for (int i = 0; i < kMaxAcceptsPerWakeup; ++i) {
    int raw = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (raw < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        spdlog::warn("control socket accept failed: {}", errno_text(errno));
      }
      return;
    }
    if (connections_.size() >= limits_.max_connections) {
      refuse_busy(raw);
      continue;
    }
    auto conn = std::make_unique<Connection>(raw);
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(raw, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      spdlog::warn("control connection without peer credentials: {}", errno_text(errno));
      continue;  // conn closes the fd
    }
    conn->peer = Peer{cred.pid, cred.uid, cred.gid};
    conn->server = this;
    conn->id = next_id_++;

    sd_event_source* io = nullptr;
    int r = sd_event_add_io(event_.get(), &io, raw, EPOLLIN, &ControlServer::on_io, conn.get());
    if (r < 0) {
      spdlog::warn("cannot watch control connection: {}", errno_text(-r));
      continue;
    }
    conn->io.reset(io);
    sd_event_source* timer = nullptr;
    r = sd_event_add_time(event_.get(), &timer, CLOCK_MONOTONIC,
                          deadline_after(limits_.request_timeout), kTimerAccuracyUsec,
                          &ControlServer::on_deadline, conn.get());
    if (r < 0) {
      spdlog::warn("cannot arm control connection deadline: {}", errno_text(-r));
      continue;
    }
    conn->timer.reset(timer);
    spdlog::debug("control connection {} from pid {} uid {}", conn->id, cred.pid, cred.uid);
    connections_.emplace(conn->id, std::move(conn));
  }
}

void ControlServer::refuse_busy(int fd) {
  UniqueFd guard(fd);
  // A fresh socket's send buffer holds this short reply, so one attempt is enough.
  const std::string line =
      to_line(reply(kResultError, "busy: too many control connections (limit " +
                                      std::to_string(limits_.max_connections) + "), try again"));
  ssize_t n = ::send(fd, line.data(), line.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  (void)n;
  spdlog::warn("control socket busy: refused a connection ({} open)", connections_.size());
}

int ControlServer::on_io(sd_event_source*, int, uint32_t, void* userdata) {
  auto* conn = static_cast<Connection*>(userdata);
  ControlServer* self = conn->server;
  if (conn->replying) {
    self->write_reply(*conn);
  } else {
    self->read_request(*conn);
  }
  return 0;
}

int ControlServer::on_deadline(sd_event_source*, uint64_t, void* userdata) {
  auto* conn = static_cast<Connection*>(userdata);
  spdlog::debug("control connection {} from pid {} timed out while {}", conn->id, conn->peer.pid,
                conn->replying ? "writing the reply" : "waiting for the request");
  conn->server->close_connection(*conn);
  return 0;
}

bool ControlServer::read_request(Connection& c) {
  char buffer[16384];
  for (;;) {
    // Read at most one byte beyond the limit: enough to tell "too large" from "just fits".
    const std::size_t room = limits_.max_request_bytes + 1 - c.in.size();
    ssize_t n = ::recv(c.fd.get(), buffer, std::min(sizeof buffer, room), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      spdlog::debug("control connection {}: read failed: {}", c.id, errno_text(errno));
      close_connection(c);
      return false;
    }
    std::string_view line;
    bool complete = false;
    if (n == 0) {
      // The peer half-closed: accept a request without the final newline.
      if (c.in.empty()) {
        close_connection(c);
        return false;
      }
      line = c.in;
      complete = true;
    } else {
      const std::size_t old_size = c.in.size();
      c.in.append(buffer, std::size_t(n));
      if (auto nl = c.in.find('\n', old_size); nl != std::string::npos) {
        line = std::string_view(c.in).substr(0, nl);
        complete = true;
      } else if (c.in.size() > limits_.max_request_bytes) {
        return start_reply(
            c, reply(kResultBadRequest, "request too large (limit " +
                                            std::to_string(limits_.max_request_bytes) + " bytes)"));
      }
    }
    if (!complete) continue;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);

    auto parsed = parse_request(line, c.peer);
    json answer;
    if (auto* bad = std::get_if<json>(&parsed)) {
      answer = std::move(*bad);
    } else {
      const Request& request = std::get<Request>(parsed);
      try {
        answer = normalize_reply(handler_(request));
      } catch (const std::exception& e) {
        spdlog::error("control command {} failed: {}", request.command, e.what());
        answer = reply(kResultError, std::string("internal error: ") + e.what());
      } catch (...) {
        spdlog::error("control command {} failed with an unknown exception", request.command);
        answer = reply(kResultError, "internal error");
      }
    }
    return start_reply(c, answer);
  }
}

bool ControlServer::start_reply(Connection& c, const json& answer) {
  c.replying = true;
  c.in.clear();
  c.in.shrink_to_fit();
  c.out = to_line(answer);
  c.written = 0;
  sd_event_source_set_io_events(c.io.get(), EPOLLOUT);
  sd_event_source_set_time(c.timer.get(), deadline_after(limits_.reply_timeout));
  sd_event_source_set_enabled(c.timer.get(), SD_EVENT_ONESHOT);
  return write_reply(c);
}

bool ControlServer::write_reply(Connection& c) {
  while (c.written < c.out.size()) {
    ssize_t n = ::send(c.fd.get(), c.out.data() + c.written, c.out.size() - c.written,
                       MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      spdlog::debug("control connection {}: write failed: {}", c.id, errno_text(errno));
      close_connection(c);
      return false;
    }
    c.written += std::size_t(n);
  }
  close_connection(c);
  return false;
}

void ControlServer::close_connection(Connection& c) {
  connections_.erase(c.id);
}

}  // namespace fo::control
