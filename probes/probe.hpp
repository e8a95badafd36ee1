// Result of one probe check, shared by every probe kind. A failed check is data, not an error.
#pragma once

#include <string>

namespace fo::probes {

struct ProbeResult {
  bool ok = false;
  double latency_ms = 0;  // time the check took, also when it failed
  // "" when ok; otherwise one short phrase for operators and history, e.g.
  // "timeout after 2000 ms", "status 503 not in 200-399", "connection refused".
  std::string error;
  int http_status = 0;  // 0 when no HTTP response was received
};

}  // namespace fo::probes
