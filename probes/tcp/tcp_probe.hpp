// TCP probe: connect (from the location's source address), optionally send a string and wait
// for an expected substring in what comes back, all on the loop with a non-blocking socket.
#pragma once

#include <systemd/sd-event.h>

#include "probes/check_table.hpp"
#include "probes/plugin.hpp"

namespace fo::probes {

class TcpPlugin final : public ProbePlugin {
 public:
  explicit TcpPlugin(sd_event* event);
  ~TcpPlugin() override;  // closes the sockets of checks in flight, drops their callbacks
  void start(const config::Probe& probe, const config::Location& from,
             std::function<void(ProbeResult)> done) override;

 private:
  struct Check;
  void on_io(uint64_t id);
  void on_timeout(uint64_t id);

  sd_event* event_;
  CheckTable<Check> checks_;
};

}  // namespace fo::probes
