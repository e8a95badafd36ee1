// Entry points of `failoverd --agent`: check the agent config, or run the agent until SIGTERM.
#pragma once

#include <string>

namespace fo::agent {

// Prints "PATH: OK ..." or every error (file:line:column); returns 0 or 1.
int check_agent_config(const std::string& path);
// Loads the agent config, serves it until SIGTERM/SIGINT. `log_level` overrides the config's.
// Returns the process exit code (1 on a start-up problem, which is logged).
int run_agent(const std::string& config_path, const std::string& log_level);

}  // namespace fo::agent
