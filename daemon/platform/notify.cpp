// systemd service notifications (see notify.hpp).
#include "daemon/platform/notify.hpp"

#include <systemd/sd-daemon.h>

#include <algorithm>

namespace fo::platform {
namespace {
// A STATUS line is for humans; cap it so a runaway reason string cannot bloat every datagram.
constexpr std::size_t kMaxStatus = 1024;
}  // namespace

std::string one_line(std::string_view text) {
  std::string out(text.substr(0, kMaxStatus));
  std::replace_if(
      out.begin(), out.end(), [](char c) { return c == '\n' || c == '\r' || c == '\0'; }, ' ');
  return out;
}

int notify(std::string_view state) {
  const std::string copy(state);  // sd_notify needs a NUL-terminated string
  return sd_notify(0, copy.c_str());
}

int notify_ready(std::string_view status) {
  return notify("READY=1\nSTATUS=" + one_line(status));
}

int notify_status(std::string_view status) {
  return notify("STATUS=" + one_line(status));
}

int notify_stopping() {
  return notify("STOPPING=1");
}

bool enable_watchdog(sd_event* event) {
  return sd_event_set_watchdog(event, 1) > 0;
}

}  // namespace fo::platform
