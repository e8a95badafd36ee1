// Plan executor: runs the ordered steps of one phase on the sd-event loop. First every step's
// pre-check (and every `check` step) runs, before anything is changed; then the steps are applied
// one at a time, each through its kind's plugin (step_plugin.hpp), with a deadline, bounded
// retries (exponential backoff with jitter, none for failures a retry cannot fix) and
// abort/continue on failure. A synchronous intent log (hooks) brackets every step, so a plan
// interrupted by a crash resumes at the first step that was not verified.
#pragma once

#include <systemd/sd-event.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "actions/exec/exec_runner.hpp"
#include "actions/step_plugin.hpp"
#include "daemon/config/config.hpp"
#include "daemon/core/types.hpp"

namespace fo::actions {

struct StepEvent {
  std::size_t index = 0;  // 0-based position in the plan
  std::string name, kind;
  // "check" (pre-check) | "apply" | "observe" (reconciliation); only apply changes anything.
  std::string stage = "apply";
  int attempt = 0;            // 1-based; 0 for a skipped step
  bool finished = false;      // false = starting
  std::string result;         // "running", "ok", "failed", "timeout", "skipped"
  bool already_done = false;  // ok, and the effect was already in place
  int exit_code = -1;
  std::string output;  // bounded excerpt of the step's output
  core::Millis duration{0};
  std::string detail;  // one line: "exited 3", "refused: ...", "unknown step kind 'x'"
};

struct PlanOutcome {
  bool ok = false;
  // True when the plan stopped in its pre-check stage, or was a dry run or an observation:
  // nothing was changed.
  bool changed_nothing = false;
  // "all 3 steps ok", "step 2 (exec#1) failed: exited 3 after 2 attempts"
  std::string detail;
  // PlanMode::observe: one line per step whose effect is not in place.
  std::vector<std::string> drift;
  // PlanMode::observe: how many steps could be observed.
  std::size_t observed = 0;
  // PlanMode::observe: the 0-based positions of the steps in `drift`, in the same order.
  std::vector<std::size_t> drift_steps;
};

struct RetryPolicy {
  core::Millis base{1000};
  core::Millis cap{30000};
  double jitter = 0.2;  // the delay is scaled by a uniform factor in [1-jitter, 1+jitter]
};

// Delay before the retry that follows failed attempt `attempt` (1-based):
// min(cap, base * 2^(attempt-1)) * (1 + jitter * (2*random01 - 1)).
core::Millis retry_delay(const RetryPolicy& policy, int attempt, double random01);

// Upper bound on step.retries, whatever the config says.
inline constexpr int kMaxRetries = 100;
// The executor's own deadline on an attempt is the step's timeout plus this grace, so a plugin
// that honours the timeout itself reports first (with a better message).
inline constexpr core::Millis kAttemptGrace{1000};

struct PlanHooks {
  // Every step event (pre-check and apply). May destroy the runner.
  std::function<void(const StepEvent&)> on_step;
  // Once, at the end. May destroy the runner.
  std::function<void(PlanOutcome)> on_done;
  // Synchronous intent log. intent_begin runs before a step's first attempt, intent_done after
  // it was verified; both return "" or an error, which fails the plan (a step whose intent
  // cannot be recorded is not started). Unset: no log.
  std::function<std::string(std::size_t index, const std::string& key)> intent_begin;
  std::function<std::string(std::size_t index, const StepOutcome& outcome)> intent_done;
};

enum class PlanMode {
  run,      // pre-checks, then apply
  dry_run,  // pre-checks only; nothing is changed
  observe,  // reconciliation: every step's observe(), nothing is changed; ok = no drift
};

struct PlanOptions {
  PlanMode mode = PlanMode::run;
  // Run the pre-check stage. A resumed plan skips it: the world is half-changed on purpose.
  bool prechecks = true;
  // Steps verified before a restart: reported as skipped, never run again.
  std::set<std::size_t> already_done;
  // A drift repair runs only the steps whose observation found drift: the others are reported
  // as skipped ("in place"), with neither pre-check nor apply. Unset: every step runs.
  std::optional<std::set<std::size_t>> only;
  RetryPolicy retry;
};

// "<group>/<plan_id>/<index>": stable across restarts for the same plan and step.
std::string idempotency_key(const std::string& group, std::uint64_t plan_id, std::size_t index);

class PlanRunner {
 public:
  // `registry` must outlive the runner. ctx.step_index and ctx.idempotency_key are filled in
  // per step. Callbacks are invoked from the loop only.
  PlanRunner(sd_event* event, const StepRegistry& registry, std::vector<config::Step> steps,
             StepContext ctx, PlanOptions options, PlanHooks hooks,
             std::function<double()> random01 = {});
  ~PlanRunner();
  PlanRunner(const PlanRunner&) = delete;
  PlanRunner& operator=(const PlanRunner&) = delete;

  // Begins on the next loop iteration (an empty plan completes there too). Only once.
  void start();
  // Stops the plan: cancels a running attempt, drops a pending retry; no more callbacks.
  void cancel();
  bool running() const { return running_; }

 private:
  enum class Stage { check, apply, observe };

  static int on_kick(sd_event_source*, void* userdata);
  static int on_retry(sd_event_source*, uint64_t, void* userdata);
  static int on_deadline(sd_event_source*, uint64_t, void* userdata);
  // Returns false when a callback destroyed or cancelled us.
  bool emit(const StepEvent& ev);
  void advance_checks();
  void advance_observe();
  void advance();
  // Verified before a restart, or not part of a repair.
  bool is_skipped(std::size_t index) const {
    return options_.already_done.count(index) != 0 ||
           (options_.only && options_.only->count(index) == 0);
  }
  void run_attempt();
  void attempt_finished(StepOutcome outcome);
  void step_failed_finally(const std::string& why);
  void complete(PlanOutcome outcome);
  bool arm_deadline();
  StepContext context_for(std::size_t index) const;
  std::string step_label(std::size_t i) const;
  StepEvent make_event(int attempt, bool finished, std::string result) const;

  sd_event* event_;
  const StepRegistry& registry_;
  std::vector<config::Step> steps_;
  StepContext ctx_;
  PlanOptions options_;
  PlanHooks hooks_;
  std::function<double()> random01_;
  std::mt19937_64 rng_;

  bool started_ = false;
  bool running_ = false;
  Stage stage_ = Stage::check;
  std::size_t index_ = 0;
  int attempt_ = 0;
  core::Millis attempt_started_{0};
  std::unique_ptr<StepAttempt> attempt_handle_;
  std::size_t skipped_ = 0;
  std::size_t ok_steps_ = 0;
  std::size_t checks_run_ = 0;
  std::vector<std::string> continued_failures_;
  std::vector<std::string> check_details_;
  std::vector<std::string> drift_;
  std::vector<std::size_t> drift_steps_;
  std::size_t observed_ = 0;
  EventSourcePtr kick_src_;
  EventSourcePtr retry_src_;
  EventSourcePtr deadline_src_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace fo::actions
