// `failoverctl failover G --dry-run` and `failoverctl reconcile G --dry-run`: the plan a phase
// would run, resolved from the config and printed, then its pre-checks (dry run) or every
// step's observation of its effect (reconcile), run here and now with the same step plugins as
// the daemon. Nothing is changed in either mode.
#pragma once

#include <iosfwd>
#include <string>

#include "daemon/config/config.hpp"
#include "daemon/core/types.hpp"

namespace fo::ctl {

struct PlanCommand {
  std::string group;
  core::Phase phase = core::Phase::failover;
  core::Site target = core::Site::secondary;  // the site that serves once the plan is done
  bool observe = false;  // false: pre-checks (dry run); true: observe effects (reconcile)
  bool forced = false;   // as if an operator forced the plan (gates report, not refuse)
  bool json = false;     // one JSON object per step, then a summary object (docs/failoverctl.md)
};

// Exit code: 0 pre-checks pass / no drift; 1 a pre-check failed / drift found; 2 unknown group.
int run_plan_locally(const config::Config& cfg, const PlanCommand& cmd, std::ostream& out,
                     std::ostream& err);

// One line describing what a step does for `target` ("dns rfc2136 www.example. A -> 192.0.2.1").
std::string describe_step(const config::Step& step, core::Site target);

}  // namespace fo::ctl
