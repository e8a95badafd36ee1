// The `systemd` step kind: start, stop or restart a unit through org.freedesktop.systemd1 over
// sd-bus attached to the daemon's sd-event loop, wait for the job and verify ActiveState.
// See docs/steps/systemd.md.
#pragma once

#include <systemd/sd-event.h>

#include <memory>
#include <string>

#include "actions/step_plugin.hpp"

namespace fo::actions {

// Each attempt opens its own bus connection on `event` (async connect, async calls only), so
// destroying the attempt drops every pending call and match at once. `event` must outlive the
// plugin.
std::unique_ptr<StepPlugin> make_systemd_step_plugin(sd_event* event);

// The address used when a step has no bus_address: $DBUS_SYSTEM_BUS_ADDRESS, else
// "unix:path=/run/dbus/system_bus_socket".
std::string system_bus_address();

}  // namespace fo::actions
