// Exec probe: runs a check program (argv, no shell) through the shared ExecRunner; exit 0 is
// healthy. The program learns where it runs from FAILOVER_* environment variables.
#pragma once

#include <cstdint>
#include <set>

#include "actions/exec/exec_runner.hpp"
#include "probes/plugin.hpp"

namespace fo::probes {

class ExecPlugin final : public ProbePlugin {
 public:
  explicit ExecPlugin(actions::ExecRunner& runner) : runner_(runner) {}
  // Kills the checks still running (the runner must still exist).
  ~ExecPlugin() override;
  ExecPlugin(const ExecPlugin&) = delete;
  ExecPlugin& operator=(const ExecPlugin&) = delete;

  void start(const config::Probe& probe, const config::Location& from,
             std::function<void(ProbeResult)> done) override;

 private:
  actions::ExecRunner& runner_;
  std::set<uint64_t> running_;
};

// The error text for a failed run (exposed for tests): "exited 1: <first output line>",
// "timed out after 2s", "refused: /x is writable by group".
std::string describe_exec_failure(const actions::ExecResult& r);

}  // namespace fo::probes
