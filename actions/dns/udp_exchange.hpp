// One DNS request over UDP on the loop's own socket (ldns' resolver would block the loop): a
// connected socket, so an ICMP "port unreachable" ends the wait at once as "connection
// refused", and replies from other addresses never reach us. Bounded in time and in the number
// of stray replies it skips.
#pragma once

#include <systemd/sd-event.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "daemon/config/step_dns.hpp"
#include "daemon/core/types.hpp"
#include "daemon/platform/event.hpp"
#include "probes/net.hpp"

namespace fo::actions::dns {

struct Exchanged {
  bool ok = false;
  bool timed_out = false;
  std::vector<uint8_t> reply;  // a message with the request's ID and QR set
  std::string error;           // "connection refused", "no reply within 2000 ms"
};

class UdpExchange {
 public:
  using Done = std::function<void(Exchanged)>;
  // Sends at once; `done` runs once, from the loop (never from the constructor). Destroying
  // the exchange cancels it; `done` may destroy it.
  UdpExchange(sd_event* event, const config::DnsServer& server, const std::vector<uint8_t>& wire,
              uint16_t id, core::Millis timeout, Done done);
  UdpExchange(const UdpExchange&) = delete;
  UdpExchange& operator=(const UdpExchange&) = delete;

 private:
  void on_readable();
  void finish(Exchanged result);

  uint16_t id_;
  core::Millis timeout_;
  Done done_;
  probes::UniqueFd fd_;
  std::unique_ptr<probes::IoWatch> io_;
  std::unique_ptr<platform::Timer> timer_;
  std::string setup_error_;
  int ignored_ = 0;
};

}  // namespace fo::actions::dns
