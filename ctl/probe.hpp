// `failoverctl probe`: one round of every group's probes from every configured location (local
// checks and remote agents), run here and now without the daemon, and printed.
#pragma once

#include <iosfwd>
#include <string>

#include "daemon/config/config.hpp"

namespace fo::ctl {

struct ProbeCommand {
  std::string group;  // "" = every group
  bool json = false;  // one JSON object per line (a contract, see docs/failoverctl.md)
};

// Exit code: 0 every result healthy; 1 some check failed or gave no result; 2 unknown group.
int run_probe_round(const config::Config& cfg, const ProbeCommand& cmd, std::ostream& out,
                    std::ostream& err);

}  // namespace fo::ctl
