// The `dns` step kind: points one record (A, AAAA or CNAME) at the site that is to serve,
// through an RFC 2136 update signed with TSIG or through the PowerDNS HTTP API, and verifies
// that every listed authoritative server answers the new data. See docs/steps/dns.md.
#pragma once

#include <systemd/sd-event.h>

#include <memory>

#include "actions/step_plugin.hpp"
#include "daemon/platform/curl_multi.hpp"

namespace fo::actions {

// `curl` (the daemon's shared multi handle, on the same loop) must outlive the plugin.
std::unique_ptr<StepPlugin> make_dns_step_plugin(sd_event* event, platform::CurlMulti& curl);

}  // namespace fo::actions
