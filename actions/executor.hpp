// Plan executor: runs the ordered steps of one phase, one at a time, on the sd-event loop,
// with bounded retries (exponential backoff with jitter) and abort/continue on failure.
#pragma once

#include <systemd/sd-event.h>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "actions/exec/exec_runner.hpp"
#include "daemon/config/config.hpp"
#include "daemon/core/types.hpp"

namespace fo::actions {

struct StepEvent {
  std::size_t index = 0;  // 0-based position in the plan
  std::string name, kind;
  int attempt = 0;        // 1-based; 0 for a skipped step
  bool finished = false;  // false = starting
  std::string result;     // "running", "ok", "failed", "timeout", "skipped"
  int exit_code = -1;
  std::string output;  // bounded excerpt of the step's output
  core::Millis duration{0};
  std::string detail;  // one line: "exited 3", "refused: ...", "unknown step kind 'x'"
};

struct PlanOutcome {
  bool ok = false;
  // "all 3 steps ok", "step 2 (exec#1) failed: exited 3 after 2 attempts"
  std::string detail;
};

struct RetryPolicy {
  core::Millis base{1000};
  core::Millis cap{30000};
  double jitter = 0.2;  // the delay is scaled by a uniform factor in [1-jitter, 1+jitter]
};

// Delay before the retry that follows failed attempt `attempt` (1-based):
// min(cap, base * 2^(attempt-1)) * (1 + jitter * (2*random01 - 1)).
core::Millis retry_delay(const RetryPolicy& policy, int attempt, double random01);

// Environment keys with this prefix belong to the daemon's context; a step cannot set them.
inline constexpr std::string_view kReservedEnvPrefix = "FAILOVER_";
// Upper bound on step.retries, whatever the config says.
inline constexpr int kMaxRetries = 100;

class PlanRunner {
 public:
  // Callbacks are invoked from the loop only. on_step and on_done may destroy the runner;
  // nothing is touched afterwards. cancel() silences both callbacks. `exec` must outlive this.
  PlanRunner(sd_event* event, ExecRunner& exec, std::vector<config::Step> steps,
             std::map<std::string, std::string> context_env, std::set<std::size_t> already_done,
             RetryPolicy retry, std::function<void(const StepEvent&)> on_step,
             std::function<void(PlanOutcome)> on_done, std::function<double()> random01 = {});
  ~PlanRunner();
  PlanRunner(const PlanRunner&) = delete;
  PlanRunner& operator=(const PlanRunner&) = delete;

  // Begins on the next loop iteration (an empty plan completes there too). Only once.
  void start();
  // Stops the plan: kills a running step, drops a pending retry; no more callbacks.
  void cancel();
  bool running() const { return running_; }

 private:
  static int on_kick(sd_event_source*, void* userdata);
  static int on_retry(sd_event_source*, uint64_t, void* userdata);
  // Returns false when a callback destroyed or cancelled us.
  bool emit(const StepEvent& ev);
  void advance();
  void run_attempt();
  void attempt_finished(ExecResult result);
  void step_failed_finally(const std::string& why);
  void complete(PlanOutcome outcome);
  std::string step_label(std::size_t i) const;
  StepEvent make_event(int attempt, bool finished, std::string result) const;

  sd_event* event_;
  ExecRunner& exec_;
  std::vector<config::Step> steps_;
  std::map<std::string, std::string> context_env_;
  std::set<std::size_t> already_done_;
  RetryPolicy retry_;
  std::function<void(const StepEvent&)> on_step_;
  std::function<void(PlanOutcome)> on_done_;
  std::function<double()> random01_;
  std::mt19937_64 rng_;

  bool started_ = false;
  bool running_ = false;
  std::size_t index_ = 0;
  int attempt_ = 0;
  uint64_t exec_id_ = 0;  // 0: no exec in flight
  std::size_t skipped_ = 0;
  std::size_t ok_steps_ = 0;
  std::vector<std::string> continued_failures_;
  EventSourcePtr kick_src_;
  EventSourcePtr retry_src_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace fo::actions
