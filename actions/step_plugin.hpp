// The interface every step kind implements (exec, check, dns, postgres, systemd, webhook), and
// the registry the plan executor dispatches through. A plugin performs single attempts; order,
// retries, backoff, the per-step deadline and the intent log belong to the caller.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "daemon/config/config.hpp"
#include "daemon/core/types.hpp"

namespace fo::actions {

// What one attempt produced. Expected failures are data, never exceptions.
struct StepOutcome {
  enum class Status { ok, failed, timed_out };
  Status status = Status::failed;
  // False when another attempt cannot help (bad TSIG key, HTTP 401, lag gate refused, unit not
  // found): the executor then stops retrying at once, which keeps a broken plan from hammering
  // a server (seed 003).
  bool retryable = true;
  // True when the effect was already in place and nothing had to change (re-run after a crash,
  // reconciliation found no drift). Still "ok".
  bool already_done = false;
  int exit_code = -1;  // exec and check-with-exec only
  std::string output;  // bounded excerpt for history (never a secret)
  std::string detail;  // one line: "3/3 servers answer 198.18.1.11", "HTTP 401 from API"
  core::Millis duration{0};

  bool ok() const { return status == Status::ok; }
  static StepOutcome success(std::string detail, bool already = false) {
    StepOutcome o;
    o.status = Status::ok;
    o.already_done = already;
    o.detail = std::move(detail);
    return o;
  }
  static StepOutcome failure(std::string detail, bool retryable = true) {
    StepOutcome o;
    o.status = Status::failed;
    o.retryable = retryable;
    o.detail = std::move(detail);
    return o;
  }
};

// What a step knows about the plan it belongs to.
struct StepContext {
  std::string group;
  core::Phase phase = core::Phase::failover;
  core::Site target = core::Site::secondary;  // the site that serves once the plan is done
  core::Site from = core::Site::primary;      // the site that served before
  std::uint64_t plan_id = 0;
  std::uint64_t term = 0;  // leader term (fencing token) the plan runs under
  std::size_t step_index = 0;
  // Stable across restarts for the same plan and step: "<group>/<plan_id>/<step_index>".
  std::string idempotency_key;
  // An operator forced this plan: gates that guard automatic action (replication lag) may be
  // overridden; the step must say so in its detail.
  bool forced = false;
  // FAILOVER_* variables for exec steps (group, phase, from, to, reason, plan id, term, ...).
  std::map<std::string, std::string> env;
  // Transition summary for notification steps (webhook): reason sentence and initiator.
  std::string reason;
  std::string initiator;
};

// A running attempt. Destroying it cancels the attempt: no callback runs afterwards, any child
// process, socket or D-Bus call it owns is released.
class StepAttempt {
 public:
  virtual ~StepAttempt() = default;
};

using StepDone = std::function<void(StepOutcome)>;

class StepPlugin {
 public:
  virtual ~StepPlugin() = default;

  // Applies `step` for ctx.target and verifies the effect, within `step.timeout` (the executor
  // also enforces that deadline by destroying the attempt). Idempotent: when the effect is
  // already in place (e.g. after a crash between apply and the intent log's "done"), it only
  // verifies and reports already_done. `done` runs exactly once, from the loop, never inside
  // apply(), unless the returned attempt is destroyed first.
  virtual std::unique_ptr<StepAttempt> apply(const config::Step& step, const StepContext& ctx,
                                             StepDone done) = 0;

  // Checks, without changing anything, that apply() can be expected to succeed (credentials
  // readable, server reachable, lag within the gate). Runs before any step of the plan changes
  // anything, and for `--dry-run`. Returns nullptr when the kind has nothing to check.
  virtual std::unique_ptr<StepAttempt> check(const config::Step& step, const StepContext& ctx,
                                             StepDone done) {
    (void)step, (void)ctx, (void)done;
    return nullptr;
  }

  // Reconciliation: observes whether the effect of `step` for ctx.target is in place, changing
  // nothing. ok = in place; failed (detail says what differs) = drift. Returns nullptr when the
  // kind cannot observe its effect (exec, webhook).
  virtual std::unique_ptr<StepAttempt> observe(const config::Step& step, const StepContext& ctx,
                                               StepDone done) {
    (void)step, (void)ctx, (void)done;
    return nullptr;
  }
};

// Kind name -> plugin. Plugins are owned by the registry and outlive every attempt.
class StepRegistry {
 public:
  void add(std::string kind, std::unique_ptr<StepPlugin> plugin) {
    plugins_[std::move(kind)] = std::move(plugin);
  }
  StepPlugin* find(std::string_view kind) const {
    auto it = plugins_.find(std::string(kind));
    return it == plugins_.end() ? nullptr : it->second.get();
  }

 private:
  std::map<std::string, std::unique_ptr<StepPlugin>> plugins_;
};

}  // namespace fo::actions
