// The `exec` step kind: runs the step's argv through ExecRunner with the plan's FAILOVER_*
// environment (which a step cannot override) and FAILOVER_IDEMPOTENCY_KEY, so a hook can tell a
// re-run after a crash from a new request.
#pragma once

#include <memory>

#include "actions/exec/exec_runner.hpp"
#include "actions/step_plugin.hpp"

namespace fo::actions {

// Environment keys with this prefix belong to the daemon's context; a step cannot set them.
inline constexpr std::string_view kReservedEnvPrefix = "FAILOVER_";

// `exec` must outlive the plugin.
std::unique_ptr<StepPlugin> make_exec_step_plugin(ExecRunner& exec);

// The request an exec step runs (exposed for tests and for the check kind's exec probes).
ExecRequest exec_request_for(const config::Step& step, const StepContext& ctx);

}  // namespace fo::actions
