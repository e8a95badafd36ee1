// Config of a `systemd` step: start, stop or restart a unit through sd-bus (docs/steps/systemd.md).
#pragma once

#include <string>

namespace fo::config {

struct SystemdStep {
  std::string unit;              // "nginx.service": a valid unit name with a known suffix
  std::string action = "start";  // "start" | "stop" | "restart"
  std::string bus_address;       // "unix:path=/run/x/bus"; "" = the system bus
  std::string mode = "replace";  // systemd job mode
};

}  // namespace fo::config
