// Test helpers: a ControlServer on its own sd-event loop in a background thread (sd-event is
// single-threaded, so the loop, the server and the handler all live on that thread), a temp
// directory, and raw socket helpers for speaking the protocol badly on purpose.
#pragma once

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>

#include "daemon/control/server.hpp"

namespace fo::control::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "fo-control-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

class ServerThread {
 public:
  ServerThread(std::string path, ControlServer::Handler handler, ServerLimits limits = {})
      : stop_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (stop_fd_ < 0) throw std::runtime_error("eventfd failed");
    std::promise<void> started;
    auto ready = started.get_future();
    thread_ = std::thread([this, path = std::move(path), handler = std::move(handler), limits,
                           started = std::move(started)]() mutable {
      sd_event* raw = nullptr;
      if (sd_event_new(&raw) < 0) {
        started.set_exception(std::make_exception_ptr(std::runtime_error("sd_event_new failed")));
        return;
      }
      EventPtr event(raw);
      try {
        ControlServer server(event.get(), path, handler, limits);
        sd_event_source* stop = nullptr;
        sd_event_add_io(
            event.get(), &stop, stop_fd_, EPOLLIN,
            [](sd_event_source* s, int, uint32_t, void*) {
              return sd_event_exit(sd_event_source_get_event(s), 0);
            },
            nullptr);
        EventSourcePtr stop_source(stop);
        started.set_value();
        sd_event_loop(event.get());
      } catch (...) {
        started.set_exception(std::current_exception());
      }
    });
    try {
      ready.get();
    } catch (...) {
      thread_.join();
      ::close(stop_fd_);
      throw;
    }
  }

  ~ServerThread() {
    uint64_t one = 1;
    ssize_t n = ::write(stop_fd_, &one, sizeof one);
    (void)n;
    thread_.join();
    ::close(stop_fd_);
  }

  ServerThread(const ServerThread&) = delete;
  ServerThread& operator=(const ServerThread&) = delete;

 private:
  int stop_fd_;
  std::thread thread_;
};

// A connected raw socket (blocking), or -1 with errno set.
inline int connect_raw(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

inline bool send_all(int fd, const std::string& data) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    sent += std::size_t(n);
  }
  return true;
}

// Reads until EOF (or a reset) or the deadline. `eof` tells whether the peer closed in time.
inline std::string read_until_closed(int fd, std::chrono::milliseconds limit, bool* eof = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::string in;
  char buffer[65536];
  if (eof) *eof = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return in;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, int(left.count())) <= 0) continue;
    ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n > 0) {
      in.append(buffer, std::size_t(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (eof) *eof = true;
    return in;
  }
}

// One raw exchange: sends `data` verbatim and parses the reply line.
inline nlohmann::json raw_exchange(const std::string& path, const std::string& data) {
  int fd = connect_raw(path);
  if (fd < 0) throw std::runtime_error("connect failed");
  send_all(fd, data);
  std::string reply = read_until_closed(fd, std::chrono::seconds(5));
  ::close(fd);
  return nlohmann::json::parse(reply, nullptr, false);
}

}  // namespace fo::control::testing
