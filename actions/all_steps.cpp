// Registration of every step kind of this build (see all_steps.hpp).
#include "actions/all_steps.hpp"

#include <algorithm>

#include "actions/check/check_step.hpp"
#include "actions/exec/exec_step.hpp"
#ifdef FO_HAVE_STEP_DNS
#include "actions/dns/dns_step.hpp"
#endif
#ifdef FO_HAVE_STEP_POSTGRES
#include "actions/postgres/postgres_step.hpp"
#endif
#ifdef FO_HAVE_STEP_SYSTEMD
#include "actions/systemd/systemd_step.hpp"
#endif
#ifdef FO_HAVE_STEP_WEBHOOK
#include "actions/webhook/webhook_step.hpp"
#endif

namespace fo::actions {

std::unique_ptr<StepRegistry> make_step_registry(const StepDeps& deps) {
  auto r = std::make_unique<StepRegistry>();
  r->add("exec", make_exec_step_plugin(*deps.exec));
  r->add("check", make_check_step_plugin(*deps.probes, deps.local));
#ifdef FO_HAVE_STEP_DNS
  r->add("dns", make_dns_step_plugin(deps.event, *deps.curl));
#endif
#ifdef FO_HAVE_STEP_POSTGRES
  r->add("postgres", make_postgres_step_plugin(deps.event));
#endif
#ifdef FO_HAVE_STEP_SYSTEMD
  r->add("systemd", make_systemd_step_plugin(deps.event));
#endif
#ifdef FO_HAVE_STEP_WEBHOOK
  r->add("webhook", make_webhook_step_plugin(deps.event));
#endif
  return r;
}

std::vector<std::string> built_step_kinds() {
  std::vector<std::string> kinds = {"check", "exec"};
#ifdef FO_HAVE_STEP_DNS
  kinds.push_back("dns");
#endif
#ifdef FO_HAVE_STEP_POSTGRES
  kinds.push_back("postgres");
#endif
#ifdef FO_HAVE_STEP_SYSTEMD
  kinds.push_back("systemd");
#endif
#ifdef FO_HAVE_STEP_WEBHOOK
  kinds.push_back("webhook");
#endif
  std::sort(kinds.begin(), kinds.end());
  return kinds;
}

}  // namespace fo::actions
