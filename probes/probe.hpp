// Result of one probe check, shared by every probe kind. A failed check is data, not an error.
#pragma once

#include <string>
#include <utility>

namespace fo::probes {

struct ProbeResult {
  bool ok = false;
  double latency_ms = 0;  // time the check took, also when it failed
  // "" when ok; otherwise one short phrase for operators and history. Plugins write it without
  // the kind ("connection refused"); ProbeDispatcher prefixes the kind ("tcp: connection
  // refused", "dns: NXDOMAIN"). See docs/probes.md for every text.
  std::string error;
  int http_status = 0;  // 0 when no HTTP response was received
  // The check did not run (e.g. ProbeDispatcher's queue was full): no verdict, not a failure.
  // The daemon counts it as a missing result.
  bool missing = false;

  static ProbeResult success() {
    ProbeResult r;
    r.ok = true;
    return r;
  }
  static ProbeResult failure(std::string why) {
    ProbeResult r;
    r.error = std::move(why);
    return r;
  }
};

}  // namespace fo::probes
