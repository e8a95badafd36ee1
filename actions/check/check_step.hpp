// The `check` step kind: runs one probe (any probe kind) and passes when it is healthy. Check
// steps run in the plan's pre-check stage, before anything is changed (a failed check aborts
// the plan with nothing touched), and again at their place in the plan, where they guard the
// steps that follow (e.g. "the secondary answers" right before DNS is repointed).
#pragma once

#include <memory>

#include "actions/step_plugin.hpp"
#include "probes/dispatcher.hpp"

namespace fo::actions {

// `probes` must outlive the plugin; checks run from `from` (the daemon's local location).
std::unique_ptr<StepPlugin> make_check_step_plugin(probes::ProbeDispatcher& probes,
                                                   config::Location from);

}  // namespace fo::actions
