// The control socket server: accepts connections on an AF_UNIX stream socket, reads one JSON
// request per connection, hands well-formed requests to the daemon's handler and writes the
// reply. Everything runs non-blocking on the daemon's sd-event loop; all limits are enforced
// here so the handler never sees malformed or oversized input.
#pragma once

#include <sys/types.h>
#include <systemd/sd-event.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "daemon/control/protocol.hpp"

namespace fo::control {

struct ServerLimits {
  std::size_t max_request_bytes = kMaxRequestBytes;
  std::size_t max_connections = kMaxConnections;
  std::chrono::milliseconds request_timeout = kRequestTimeout;  // to receive the whole request
  std::chrono::milliseconds reply_timeout = kReplyTimeout;      // to write the whole reply
};

struct SdEventSourceDeleter {
  void operator()(sd_event_source* s) const { sd_event_source_disable_unref(s); }
};
using EventSourcePtr = std::unique_ptr<sd_event_source, SdEventSourceDeleter>;

struct SdEventDeleter {
  void operator()(sd_event* e) const { sd_event_unref(e); }
};
using EventPtr = std::unique_ptr<sd_event, SdEventDeleter>;

class ControlServer {
 public:
  using Handler = std::function<nlohmann::json(const Request&)>;
  using Limits = ServerLimits;

  // Binds and listens on `path` (mode 0660). A stale socket file (nobody listening) is
  // replaced. Throws std::runtime_error when another daemon listens there, when the path
  // exists but is not a socket, or when the socket cannot be created.
  ControlServer(sd_event* event, std::string path, Handler handler, Limits limits = Limits());
  ~ControlServer();  // closes every connection and unlinks the socket file (if still ours)

  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  const std::string& path() const { return path_; }
  std::size_t connection_count() const { return connections_.size(); }

 private:
  struct Connection;

  static int on_listen(sd_event_source* s, int fd, uint32_t revents, void* userdata);
  static int on_io(sd_event_source* s, int fd, uint32_t revents, void* userdata);
  static int on_deadline(sd_event_source* s, uint64_t usec, void* userdata);

  void accept_pending();
  void refuse_busy(int fd);
  // Each returns false when the connection is finished and has been removed.
  bool read_request(Connection& c);
  bool write_reply(Connection& c);
  bool start_reply(Connection& c, const nlohmann::json& reply);
  void close_connection(Connection& c);
  uint64_t deadline_after(std::chrono::milliseconds d) const;

  EventPtr event_;
  std::string path_;
  Handler handler_;
  Limits limits_;
  int listen_fd_ = -1;
  dev_t socket_dev_ = 0;
  ino_t socket_ino_ = 0;
  EventSourcePtr listen_source_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::unique_ptr<Connection>> connections_;
};

}  // namespace fo::control
