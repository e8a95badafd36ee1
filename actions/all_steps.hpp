// Every step kind this build has, registered once for the daemon and for failoverctl (dry runs,
// reconcile --dry-run), so both run a plan with exactly the same plugins.
#pragma once

#include <systemd/sd-event.h>

#include <memory>
#include <string>
#include <vector>

#include "actions/exec/exec_runner.hpp"
#include "actions/step_plugin.hpp"
#include "daemon/config/config.hpp"
#include "daemon/platform/curl_multi.hpp"
#include "probes/dispatcher.hpp"

namespace fo::actions {

struct StepDeps {
  sd_event* event = nullptr;
  ExecRunner* exec = nullptr;
  probes::ProbeDispatcher* probes = nullptr;
  platform::CurlMulti* curl = nullptr;
  config::Location local;  // where check steps probe from
};

// Everything in `deps` must outlive the registry.
std::unique_ptr<StepRegistry> make_step_registry(const StepDeps& deps);
// The kinds registered by make_step_registry ("check", "exec", ...), sorted.
std::vector<std::string> built_step_kinds();

}  // namespace fo::actions
