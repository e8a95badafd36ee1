// Plan executor (see executor.hpp).
#include "actions/executor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <system_error>

namespace fo::actions {
namespace {

core::Millis mono_ms(sd_event* event) {
  uint64_t usec = 0;
  if (sd_event_now(event, CLOCK_MONOTONIC, &usec) < 0) return core::Millis(0);
  return core::Millis(static_cast<int64_t>(usec / 1000));
}

std::string_view result_name(StepOutcome::Status s) {
  switch (s) {
    case StepOutcome::Status::ok:
      return "ok";
    case StepOutcome::Status::timed_out:
      return "timeout";
    case StepOutcome::Status::failed:
      break;
  }
  return "failed";
}

PlanOutcome outcome_of(bool ok, bool changed_nothing, std::string detail) {
  PlanOutcome o;
  o.ok = ok;
  o.changed_nothing = changed_nothing;
  o.detail = std::move(detail);
  return o;
}

}  // namespace

core::Millis retry_delay(const RetryPolicy& policy, int attempt, double random01) {
  const double base = static_cast<double>(std::max<int64_t>(0, policy.base.count()));
  const double cap = static_cast<double>(std::max<int64_t>(0, policy.cap.count()));
  // Clamp the exponent: 2^62 ms is beyond any cap already.
  const int exponent = std::clamp(attempt - 1, 0, 62);
  const double raw = std::min(cap, base * std::ldexp(1.0, exponent));
  const double jitter = std::clamp(policy.jitter, 0.0, 1.0);
  const double r = std::clamp(random01, 0.0, 1.0);
  const double scaled = raw * (1.0 + jitter * (2.0 * r - 1.0));
  return core::Millis(static_cast<int64_t>(std::llround(std::max(0.0, scaled))));
}

std::string idempotency_key(const std::string& group, std::uint64_t plan_id, std::size_t index) {
  return group + "/" + std::to_string(plan_id) + "/" + std::to_string(index);
}

PlanRunner::PlanRunner(sd_event* event, const StepRegistry& registry,
                       std::vector<config::Step> steps, StepContext ctx, PlanOptions options,
                       PlanHooks hooks, std::function<double()> random01)
    : event_(sd_event_ref(event)),
      registry_(registry),
      steps_(std::move(steps)),
      ctx_(std::move(ctx)),
      options_(std::move(options)),
      hooks_(std::move(hooks)),
      random01_(std::move(random01)),
      rng_(std::random_device{}()) {
  if (!random01_) {
    random01_ = [this] { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); };
  }
}

PlanRunner::~PlanRunner() {
  *alive_ = false;
  cancel();
  sd_event_unref(event_);
}

void PlanRunner::start() {
  if (started_) return;
  started_ = true;
  running_ = true;
  if (options_.mode == PlanMode::observe)
    stage_ = Stage::observe;
  else if (options_.prechecks || options_.mode == PlanMode::dry_run)
    stage_ = Stage::check;
  else
    stage_ = Stage::apply;
  sd_event_source* s = nullptr;
  int r = sd_event_add_defer(event_, &s, &PlanRunner::on_kick, this);
  if (r < 0) throw std::system_error(-r, std::generic_category(), "sd_event_add_defer");
  kick_src_.reset(s);
}

void PlanRunner::cancel() {
  if (!running_) return;
  running_ = false;
  kick_src_.reset();
  retry_src_.reset();
  deadline_src_.reset();
  attempt_handle_.reset();
  spdlog::debug("plan: cancelled at step {}", index_ + 1);
}

int PlanRunner::on_kick(sd_event_source*, void* userdata) {
  auto* self = static_cast<PlanRunner*>(userdata);
  self->kick_src_.reset();
  if (self->stage_ == Stage::check)
    self->advance_checks();
  else if (self->stage_ == Stage::observe)
    self->advance_observe();
  else
    self->advance();
  return 0;
}

int PlanRunner::on_retry(sd_event_source*, uint64_t, void* userdata) {
  auto* self = static_cast<PlanRunner*>(userdata);
  self->retry_src_.reset();
  self->run_attempt();
  return 0;
}

int PlanRunner::on_deadline(sd_event_source*, uint64_t, void* userdata) {
  auto* self = static_cast<PlanRunner*>(userdata);
  self->deadline_src_.reset();
  self->attempt_handle_.reset();  // cancels the plugin's work; its callback will not run
  StepOutcome o;
  o.status = StepOutcome::Status::timed_out;
  o.detail = "no result within " + core::format_duration(self->steps_[self->index_].timeout) +
             " (step timeout)";
  self->attempt_finished(std::move(o));
  return 0;
}

bool PlanRunner::emit(const StepEvent& ev) {
  if (!hooks_.on_step) return running_;
  std::shared_ptr<bool> alive = alive_;
  auto on_step = hooks_.on_step;  // the callback may destroy *this, and with it hooks_
  try {
    on_step(ev);
  } catch (const std::exception& e) {
    spdlog::error("plan: step callback threw: {}", e.what());
  } catch (...) {
    spdlog::error("plan: step callback threw a non-standard exception");
  }
  return *alive && running_;
}

StepEvent PlanRunner::make_event(int attempt, bool finished, std::string result) const {
  StepEvent ev;
  ev.index = index_;
  ev.name = steps_[index_].name;
  ev.kind = steps_[index_].kind;
  ev.stage = stage_ == Stage::check ? "check" : stage_ == Stage::observe ? "observe" : "apply";
  ev.attempt = attempt;
  ev.finished = finished;
  ev.result = std::move(result);
  return ev;
}

std::string PlanRunner::step_label(std::size_t i) const {
  return "step " + std::to_string(i + 1) + " (" + steps_[i].name + ")";
}

StepContext PlanRunner::context_for(std::size_t index) const {
  StepContext c = ctx_;
  c.step_index = index;
  c.idempotency_key = idempotency_key(ctx_.group, ctx_.plan_id, index);
  return c;
}

bool PlanRunner::arm_deadline() {
  const core::Millis limit = steps_[index_].timeout + kAttemptGrace;
  sd_event_source* s = nullptr;
  int r = sd_event_add_time_relative(event_, &s, CLOCK_MONOTONIC,
                                     static_cast<uint64_t>(limit.count()) * 1000,
                                     kTimerAccuracyUsec, &PlanRunner::on_deadline, this);
  if (r < 0) {
    spdlog::error("plan: cannot arm step deadline: {}", std::generic_category().message(-r));
    return false;
  }
  deadline_src_.reset(s);
  return true;
}

// Pre-check stage: one check per step that has one, in plan order, changing nothing. The first
// failure stops the plan; a dry run ends here.
void PlanRunner::advance_checks() {
  while (index_ < steps_.size()) {
    const config::Step& step = steps_[index_];
    if (is_skipped(index_) || !step.precheck) {
      ++index_;
      continue;
    }
    StepPlugin* plugin = registry_.find(step.kind);
    if (!plugin) {
      StepEvent ev = make_event(1, true, "failed");
      ev.detail = "unknown step kind '" + step.kind + "'";
      if (!emit(ev)) return;
      return complete(
          outcome_of(false, true, "pre-check of " + step_label(index_) + " failed: " + ev.detail));
    }
    attempt_ = 1;
    attempt_started_ = mono_ms(event_);
    const std::size_t index = index_;
    std::shared_ptr<bool> alive = alive_;
    std::unique_ptr<StepAttempt> handle =
        plugin->check(step, context_for(index_), [this, alive](StepOutcome o) {
          if (!*alive) return;
          deadline_src_.reset();
          attempt_handle_.reset();
          attempt_finished(std::move(o));
        });
    if (!handle) {  // nothing to check for this step
      ++index_;
      continue;
    }
    attempt_handle_ = std::move(handle);
    ++checks_run_;
    // The event goes out after the check started: a callback that cancels us also drops it.
    if (!emit(make_event(1, false, "running"))) return;
    if (index == index_ && attempt_handle_ && !arm_deadline()) {
      attempt_handle_.reset();
      return complete(outcome_of(false, true, "cannot arm the pre-check deadline"));
    }
    return;
  }
  if (options_.mode == PlanMode::dry_run) {
    std::string detail = checks_run_ == 0
                             ? "no pre-checks"
                             : std::to_string(checks_run_) +
                                   (checks_run_ == 1 ? " pre-check" : " pre-checks") + " passed";
    for (const auto& d : check_details_) detail += "; " + d;
    return complete(outcome_of(true, true, std::move(detail)));
  }
  stage_ = Stage::apply;
  index_ = 0;
  advance();
}

// Observation (reconciliation): every step that can observe its effect does, in plan order;
// a difference is drift, not a failure, so all steps are observed.
void PlanRunner::advance_observe() {
  while (index_ < steps_.size()) {
    const config::Step& step = steps_[index_];
    StepPlugin* plugin = registry_.find(step.kind);
    if (!plugin) {
      ++index_;
      continue;
    }
    attempt_ = 1;
    attempt_started_ = mono_ms(event_);
    std::shared_ptr<bool> alive = alive_;
    const std::size_t index = index_;
    std::unique_ptr<StepAttempt> handle =
        plugin->observe(step, context_for(index_), [this, alive, index](StepOutcome o) {
          if (!*alive || index != index_) return;
          deadline_src_.reset();
          attempt_handle_.reset();
          attempt_finished(std::move(o));
        });
    if (!handle) {
      ++index_;
      continue;
    }
    attempt_handle_ = std::move(handle);
    ++observed_;
    if (!emit(make_event(1, false, "running"))) return;
    if (attempt_handle_ && !arm_deadline()) {
      attempt_handle_.reset();
      return complete(outcome_of(false, true, "cannot arm the observation deadline"));
    }
    return;
  }
  PlanOutcome o;
  o.changed_nothing = true;
  o.observed = observed_;
  o.drift = drift_;
  o.drift_steps = drift_steps_;
  o.ok = drift_.empty();
  if (observed_ == 0) {
    o.detail = "nothing to observe";
  } else if (drift_.empty()) {
    o.detail = "no drift (" + std::to_string(observed_) +
               (observed_ == 1 ? " step observed)" : " steps observed)");
  } else {
    o.detail = "drift: ";
    for (std::size_t i = 0; i < drift_.size(); ++i) o.detail += (i ? "; " : "") + drift_[i];
  }
  complete(std::move(o));
}

// Moves to the next step that has to run, reporting already-done ones as skipped.
void PlanRunner::advance() {
  while (index_ < steps_.size() && is_skipped(index_)) {
    StepEvent ev = make_event(0, true, "skipped");
    ev.detail = options_.already_done.count(index_) != 0 ? "verified before restart"
                                                         : "in place (not part of the repair)";
    ++skipped_;
    ++index_;
    if (!emit(ev)) return;
  }
  if (index_ >= steps_.size()) {
    const std::size_t n = steps_.size();
    if (n == 0) return complete(outcome_of(true, false, "no steps"));
    std::string detail;
    if (continued_failures_.empty()) {
      detail = "all " + std::to_string(n) + (n == 1 ? " step ok" : " steps ok");
    } else {
      detail = std::to_string(ok_steps_ + skipped_) + " of " + std::to_string(n) +
               " steps ok; continued past: ";
      for (std::size_t i = 0; i < continued_failures_.size(); ++i) {
        detail += (i ? "; " : "") + continued_failures_[i];
      }
    }
    if (skipped_ > 0) detail += " (" + std::to_string(skipped_) + " already done)";
    return complete(outcome_of(true, false, std::move(detail)));
  }
  attempt_ = 0;
  if (hooks_.intent_begin) {
    std::string err =
        hooks_.intent_begin(index_, idempotency_key(ctx_.group, ctx_.plan_id, index_));
    if (!err.empty()) {
      StepEvent ev = make_event(0, true, "failed");
      ev.detail = "cannot record intent: " + err;
      if (!emit(ev)) return;
      return complete(outcome_of(false, false, step_label(index_) + " not started: " + ev.detail));
    }
  }
  run_attempt();
}

void PlanRunner::run_attempt() {
  const auto& step = steps_[index_];
  ++attempt_;
  if (!emit(make_event(attempt_, false, "running"))) return;

  StepPlugin* plugin = registry_.find(step.kind);
  if (!plugin) {
    // A retry cannot fix an unknown kind; fail right away.
    const std::string why = "unknown step kind '" + step.kind + "'";
    StepEvent ev = make_event(attempt_, true, "failed");
    ev.detail = why;
    if (!emit(ev)) return;
    return step_failed_finally(why);
  }
  attempt_started_ = mono_ms(event_);
  std::shared_ptr<bool> alive = alive_;
  const std::size_t index = index_;
  const int attempt = attempt_;
  attempt_handle_ =
      plugin->apply(step, context_for(index_), [this, alive, index, attempt](StepOutcome o) {
        if (!*alive || index != index_ || attempt != attempt_) return;
        deadline_src_.reset();
        attempt_handle_.reset();
        attempt_finished(std::move(o));
      });
  if (!attempt_handle_) {
    StepOutcome o = StepOutcome::failure("the step kind did not start an attempt", false);
    return attempt_finished(std::move(o));
  }
  if (!arm_deadline()) {
    attempt_handle_.reset();
    StepOutcome o = StepOutcome::failure("cannot arm the step deadline", true);
    attempt_finished(std::move(o));
  }
}

void PlanRunner::attempt_finished(StepOutcome outcome) {
  const auto& step = steps_[index_];
  if (outcome.duration.count() == 0) outcome.duration = mono_ms(event_) - attempt_started_;
  StepEvent ev = make_event(attempt_, true, std::string(result_name(outcome.status)));
  ev.already_done = outcome.already_done;
  ev.exit_code = outcome.exit_code;
  ev.output = outcome.output;
  ev.duration = outcome.duration;
  ev.detail = outcome.detail;
  if (!emit(ev)) return;

  if (stage_ == Stage::observe) {
    if (!outcome.ok()) {
      drift_.push_back(steps_[index_].name + ": " + outcome.detail);
      drift_steps_.push_back(index_);
    }
    ++index_;
    return advance_observe();
  }
  if (stage_ == Stage::check) {
    if (!outcome.ok()) {
      return complete(outcome_of(
          false, true, "pre-check of " + step_label(index_) + " failed: " + outcome.detail));
    }
    check_details_.push_back(steps_[index_].name + ": " + outcome.detail);
    ++index_;
    return advance_checks();
  }

  if (outcome.ok()) {
    if (hooks_.intent_done) {
      std::string err = hooks_.intent_done(index_, outcome);
      if (!err.empty()) {
        return complete(outcome_of(
            false, false,
            step_label(index_) + " verified, but its completion cannot be recorded: " + err));
      }
    }
    ++ok_steps_;
    ++index_;
    return advance();
  }
  const int retries = std::clamp(step.retries, 0, kMaxRetries);
  if (outcome.retryable && attempt_ <= retries) {
    const core::Millis delay = retry_delay(options_.retry, attempt_, random01_());
    spdlog::debug("plan: {} attempt {} {}; retrying in {}", step_label(index_), attempt_,
                  outcome.detail, core::format_duration(delay));
    sd_event_source* s = nullptr;
    int r = sd_event_add_time_relative(event_, &s, CLOCK_MONOTONIC,
                                       static_cast<uint64_t>(delay.count()) * 1000,
                                       kTimerAccuracyUsec, &PlanRunner::on_retry, this);
    if (r >= 0) {
      retry_src_.reset(s);
      return;
    }
    spdlog::error("plan: cannot arm retry timer: {}", std::generic_category().message(-r));
  }
  std::string why = outcome.detail + " after " + std::to_string(attempt_) +
                    (attempt_ == 1 ? " attempt" : " attempts");
  if (!outcome.retryable && attempt_ <= retries) why += " (not retried: a retry cannot help)";
  step_failed_finally(why);
}

void PlanRunner::step_failed_finally(const std::string& why) {
  const auto& step = steps_[index_];
  std::string text = step_label(index_) + " failed: " + why;
  if (step.abort_on_failure) {
    if (!continued_failures_.empty()) {
      text += " (earlier, continued past: " + std::to_string(continued_failures_.size()) +
              (continued_failures_.size() == 1 ? " failure)" : " failures)");
    }
    return complete(outcome_of(false, false, std::move(text)));
  }
  continued_failures_.push_back(std::move(text));
  ++index_;
  advance();
}

void PlanRunner::complete(PlanOutcome outcome) {
  running_ = false;
  deadline_src_.reset();
  attempt_handle_.reset();
  spdlog::debug("plan: done: {}", outcome.detail);
  auto done = std::move(hooks_.on_done);
  hooks_.on_done = nullptr;
  if (!done) return;
  try {
    done(std::move(outcome));  // may destroy *this: nothing after this line
  } catch (const std::exception& e) {
    spdlog::error("plan: completion callback threw: {}", e.what());
  } catch (...) {
    spdlog::error("plan: completion callback threw a non-standard exception");
  }
}

}  // namespace fo::actions
