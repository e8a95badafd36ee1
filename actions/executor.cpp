// Plan executor (see executor.hpp).
#include "actions/executor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <system_error>

namespace fo::actions {

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

PlanRunner::PlanRunner(sd_event* event, ExecRunner& exec, std::vector<config::Step> steps,
                       std::map<std::string, std::string> context_env,
                       std::set<std::size_t> already_done, RetryPolicy retry,
                       std::function<void(const StepEvent&)> on_step,
                       std::function<void(PlanOutcome)> on_done, std::function<double()> random01)
    : event_(sd_event_ref(event)),
      exec_(exec),
      steps_(std::move(steps)),
      context_env_(std::move(context_env)),
      already_done_(std::move(already_done)),
      retry_(retry),
      on_step_(std::move(on_step)),
      on_done_(std::move(on_done)),
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
  if (exec_id_ != 0) exec_.cancel(std::exchange(exec_id_, 0));
  spdlog::debug("plan: cancelled at step {}", index_ + 1);
}

int PlanRunner::on_kick(sd_event_source*, void* userdata) {
  auto* self = static_cast<PlanRunner*>(userdata);
  self->kick_src_.reset();
  self->advance();
  return 0;
}

int PlanRunner::on_retry(sd_event_source*, uint64_t, void* userdata) {
  auto* self = static_cast<PlanRunner*>(userdata);
  self->retry_src_.reset();
  self->run_attempt();
  return 0;
}

bool PlanRunner::emit(const StepEvent& ev) {
  if (!on_step_) return running_;
  std::shared_ptr<bool> alive = alive_;
  auto on_step = on_step_;  // the callback may destroy *this, and with it on_step_
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
  ev.attempt = attempt;
  ev.finished = finished;
  ev.result = std::move(result);
  return ev;
}

std::string PlanRunner::step_label(std::size_t i) const {
  return "step " + std::to_string(i + 1) + " (" + steps_[i].name + ")";
}

// Moves to the next step that has to run, reporting already-done ones as skipped.
void PlanRunner::advance() {
  while (index_ < steps_.size() && already_done_.count(index_) != 0) {
    StepEvent ev = make_event(0, true, "skipped");
    ev.detail = "verified before restart";
    ++skipped_;
    ++index_;
    if (!emit(ev)) return;
  }
  if (index_ >= steps_.size()) {
    const std::size_t n = steps_.size();
    if (n == 0) return complete({true, "no steps"});
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
    return complete({true, std::move(detail)});
  }
  attempt_ = 0;
  run_attempt();
}

void PlanRunner::run_attempt() {
  const auto& step = steps_[index_];
  ++attempt_;
  if (!emit(make_event(attempt_, false, "running"))) return;

  if (step.kind != "exec") {
    // A retry cannot fix an unknown kind; fail right away.
    const std::string why = "unknown step kind '" + step.kind + "'";
    StepEvent ev = make_event(attempt_, true, "failed");
    ev.detail = why;
    if (!emit(ev)) return;
    return step_failed_finally(why);
  }

  ExecRequest req;
  req.argv = step.argv;
  req.timeout = step.timeout;
  for (const auto& [k, v] : step.env) {
    if (k.rfind(kReservedEnvPrefix, 0) == 0) {
      spdlog::warn("plan: {}: ignoring reserved environment variable {}", step_label(index_), k);
      continue;
    }
    req.env[k] = v;
  }
  for (const auto& [k, v] : context_env_) req.env[k] = v;
  exec_id_ = exec_.start(std::move(req), [this](ExecResult r) { attempt_finished(std::move(r)); });
}

void PlanRunner::attempt_finished(ExecResult result) {
  exec_id_ = 0;
  const auto& step = steps_[index_];
  const std::string summary = result.summary();
  StepEvent ev = make_event(attempt_, true,
                            result.ok()                                        ? "ok"
                            : result.outcome == ExecResult::Outcome::timed_out ? "timeout"
                                                                               : "failed");
  ev.exit_code = result.exit_code;
  ev.output = std::move(result.output);
  ev.duration = result.duration;
  ev.detail = summary;
  if (!emit(ev)) return;

  if (result.ok()) {
    ++ok_steps_;
    ++index_;
    return advance();
  }
  const int retries = std::clamp(step.retries, 0, kMaxRetries);
  if (attempt_ <= retries) {
    const core::Millis delay = retry_delay(retry_, attempt_, random01_());
    spdlog::debug("plan: {} attempt {} {}; retrying in {}", step_label(index_), attempt_, summary,
                  core::format_duration(delay));
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
  step_failed_finally(summary + " after " + std::to_string(attempt_) +
                      (attempt_ == 1 ? " attempt" : " attempts"));
}

void PlanRunner::step_failed_finally(const std::string& why) {
  const auto& step = steps_[index_];
  std::string text = step_label(index_) + " failed: " + why;
  if (step.abort_on_failure) {
    if (!continued_failures_.empty()) {
      text += " (earlier, continued past: " + std::to_string(continued_failures_.size()) +
              (continued_failures_.size() == 1 ? " failure)" : " failures)");
    }
    return complete({false, std::move(text)});
  }
  continued_failures_.push_back(std::move(text));
  ++index_;
  advance();
}

void PlanRunner::complete(PlanOutcome outcome) {
  running_ = false;
  spdlog::debug("plan: done: {}", outcome.detail);
  auto done = std::move(on_done_);
  on_done_ = nullptr;
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
