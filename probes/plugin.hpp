// The interface every probe kind implements. A plugin runs single checks; scheduling, rounds and
// thresholds belong to the caller (the daemon), and dispatch by kind to ProbeDispatcher.
#pragma once

#include <cstddef>
#include <functional>

#include "daemon/config/config.hpp"
#include "probes/probe.hpp"

namespace fo::probes {

class ProbePlugin {
 public:
  virtual ~ProbePlugin() = default;

  // Starts one check of `probe` (whose kind is this plugin's) from location `from`. `done` runs
  // exactly once, from the loop, never inside start(), unless the plugin is destroyed first,
  // which drops it. Error texts are short phrases without the kind ("connection refused"); the
  // dispatcher prefixes the kind. start() must not throw for a failed check: that is a result.
  virtual void start(const config::Probe& probe, const config::Location& from,
                     std::function<void(ProbeResult)> done) = 0;
};

}  // namespace fo::probes
