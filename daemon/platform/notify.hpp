// systemd service notifications (sd_notify): readiness, status line, stopping, watchdog.
// Without NOTIFY_SOCKET (not started by systemd) every call is a harmless no-op returning 0.
#pragma once

#include <systemd/sd-event.h>

#include <string>
#include <string_view>

namespace fo::platform {

// Sends `state` verbatim ("KEY=VALUE\n..."). Returns sd_notify's result: >0 sent, 0 no
// NOTIFY_SOCKET, <0 -errno. Failures are data: the daemon keeps running either way.
int notify(std::string_view state);

// STATUS= is one line: newlines in `status` would inject other fields, so they become spaces.
int notify_ready(std::string_view status);   // "READY=1\nSTATUS=<status>"
int notify_status(std::string_view status);  // "STATUS=<status>"
int notify_stopping();                       // "STOPPING=1"

// Lets sd-event send WATCHDOG=1 at 1/2..3/4 of WATCHDOG_USEC while the loop turns. Returns
// whether the watchdog is enabled (false when WATCHDOG_USEC is unset or WATCHDOG_PID is not us).
// This proves only that the loop turns, not that probes work (RECIPES.md §10.5).
bool enable_watchdog(sd_event* event);

// Exposed for tests.
std::string one_line(std::string_view text);

}  // namespace fo::platform
