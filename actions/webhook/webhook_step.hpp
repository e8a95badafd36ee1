// The `webhook` step kind: one HTTP POST of the transition as JSON per attempt (chat, pager),
// through libcurl on the daemon's sd-event loop. See docs/steps/webhook.md.
#pragma once

#include <systemd/sd-event.h>

#include <memory>
#include <string>

#include "actions/step_plugin.hpp"
#include "daemon/core/types.hpp"

namespace fo::actions {

// Each attempt owns its own libcurl multi handle on `event`, so destroying the attempt aborts
// its transfer at once. `event` must outlive the plugin.
std::unique_ptr<StepPlugin> make_webhook_step_plugin(sd_event* event);

// Helpers exposed for tests.
// The request body: {"group","phase","from","to","reason","initiator","plan_id","term",
// "idempotency_key","ts"}.
std::string webhook_payload(const StepContext& ctx, core::Instant ts);
// "2026-11-30T09:55:01.250Z"
std::string iso8601_utc(core::Instant t);
// The URL's host (and port) without scheme, credentials, path or query: what details may show,
// since webhook URLs often carry their secret in the path.
std::string url_host(const std::string& url);

}  // namespace fo::actions
