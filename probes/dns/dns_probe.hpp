// DNS probe: one query over UDP (retried over TCP when the reply is truncated) on the loop's
// own sockets; ldns only encodes and decodes (its resolver API would block the loop).
#pragma once

#include <systemd/sd-event.h>

#include "probes/check_table.hpp"
#include "probes/plugin.hpp"

namespace fo::probes {

class DnsPlugin final : public ProbePlugin {
 public:
  explicit DnsPlugin(sd_event* event);
  ~DnsPlugin() override;  // closes the sockets of checks in flight, drops their callbacks
  void start(const config::Probe& probe, const config::Location& from,
             std::function<void(ProbeResult)> done) override;

 private:
  struct Check;
  void on_udp(uint64_t id);
  void on_tcp(uint64_t id);
  void switch_to_tcp(uint64_t id);
  void on_timeout(uint64_t id);

  sd_event* event_;
  CheckTable<Check> checks_;
};

}  // namespace fo::probes
