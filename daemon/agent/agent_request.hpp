// Validation of one POST /v1/probe body on the agent. Each probe is checked exactly like a probe
// table of failoverd.toml: the JSON object is turned into a toml::table and handed to the config
// loader's own parse_probe, so the daemon and the agent can never disagree on the rules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/core/types.hpp"
#include "probes/agent_wire.hpp"

namespace fo::agent {

struct RequestLimits {
  std::size_t max_probes = 256;
  bool allow_exec = false;
  core::Millis max_deadline{300000};
};

struct ProbeRequest {
  unsigned status = 200;  // 200: valid; 400: malformed; 403: refused (exec not allowed)
  std::string error;      // for the JSON error reply
  std::string group;
  uint64_t round = 0;
  core::Millis deadline{0};
  std::vector<probes::agent::WireProbe> probes;
};

ProbeRequest parse_probe_request(std::string_view body, const RequestLimits& limits);

}  // namespace fo::agent
