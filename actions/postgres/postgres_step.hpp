// The `postgres` step kind: makes ctx.target's database the writable primary. Fences the
// other site's database (read-only, client sessions ended), gates on the standby's
// replication lag, waits until the standby holds the fenced primary's last WAL, promotes and
// verifies; observes "exactly one writable database, the target's" for reconciliation.
// See docs/steps/postgres.md.
#pragma once

#include <systemd/sd-event.h>

#include <memory>

#include "actions/step_plugin.hpp"

namespace fo::actions {

// The plugin runs every attempt on `event` (libpq's asynchronous API, no threads). Attempts
// must not outlive the plugin.
std::unique_ptr<StepPlugin> make_postgres_step_plugin(sd_event* event);

}  // namespace fo::actions
