// Daemon: running plans. The step registry (one plugin per step kind), the plan queue of each
// group, the intent log around every step, and what a plan's outcome does to the engine.
#include <spdlog/spdlog.h>
#include <syslog.h>

#include <set>

#include "actions/all_steps.hpp"
#include "daemon/daemon.hpp"
#include "daemon/daemon_group.hpp"
#include "daemon/events.hpp"
#include "daemon/platform/journal.hpp"

namespace fo {

using core::Millis;
using core::Phase;
using core::Site;
using core::State;

void Daemon::build_step_registry() {
  actions::StepDeps deps;
  deps.event = event_.get();
  deps.exec = exec_.get();
  deps.probes = probes_.get();
  deps.curl = curl_.get();
  // Check steps probe from this host.
  for (const auto& l : config_.locations)
    if (l.kind == config::LocationKind::local) {
      deps.local = l;
      break;
    }
  if (deps.local.name.empty()) deps.local.name = "local";
  step_registry_ = actions::make_step_registry(deps);
}

void Daemon::record_step(const std::string& name, const core::ActionRequest& a,
                         const actions::StepEvent& e) {
  const std::string phase(core::to_string(a.phase));
  const int64_t t = core::to_ms(now());
  store::ActionRecord r;
  r.group = name;
  r.plan_id = a.plan_id;
  r.phase = phase;
  r.stage = e.stage;
  r.step_index = int(e.index);
  r.step_name = e.name;
  r.kind = e.kind;
  r.attempt = e.attempt;
  r.started_ms = e.finished ? t - e.duration.count() : t;
  r.ended_ms = e.finished ? t : 0;
  r.result = e.result;
  r.exit_code = e.exit_code;
  r.output = e.output;
  r.initiator = std::string(core::to_string(a.initiator));
  r.term = a.term;
  r.detail = e.detail;
  store_->record_action(std::move(r));
  const std::string what = e.stage == "check" ? "pre-check of step" : "step";
  if (e.finished && e.stage == "apply")
    metrics_->observe_step(name, a.phase, e.name, e.result, e.duration.count() / 1000.0);
  if (e.finished && e.result != "ok" && e.result != "skipped") {
    spdlog::warn("group {}: {} {} {} ({}) attempt {}: {}", name, phase, what, e.index, e.name,
                 e.attempt, e.detail);
    platform::journal_event(events::kActionFailed, LOG_WARNING,
                            "group " + name + ": " + phase + " " + what + " " + e.name + " " +
                                e.result + ": " + e.detail,
                            {{"GROUP", name},
                             {"PHASE", phase},
                             {"STAGE", e.stage},
                             {"STEP", e.name},
                             {"ATTEMPT", std::to_string(e.attempt)},
                             {"RESULT", e.result}});
  } else if (e.finished) {
    spdlog::info("group {}: {} {} {} ({}) {}{}: {}", name, phase, what, e.index, e.name, e.result,
                 e.already_done ? " (already in place)" : "", e.detail);
  }
}

void Daemon::run_next_plan(Group& g) {
  g.retired.reset();
  if (g.running || g.plans.empty() || stopping_) return;
  core::ActionRequest a = g.plans.front();
  g.plans.pop_front();
  const std::string& name = g.cfg.name;
  // The engine state that says "plan N is in flight" must be on disk before its first step
  // changes anything: a daemon killed later resumes plan N instead of deciding a new plan
  // (whose steps would run again under new idempotency keys).
  if ((a.phase == Phase::failover || a.phase == Phase::failback) && !a.repair &&
      !store_->flush(std::chrono::seconds(2)))
    spdlog::error("group {}: the engine state could not be committed before plan {}", name,
                  a.plan_id);
  std::set<size_t> done;
  if (a.resume) {
    try {
      for (const auto& in : intents_->plan(name, a.plan_id))
        if (in.done_ms != 0) done.insert(size_t(in.step_index));
    } catch (const std::exception& e) {
      spdlog::error("group {}: cannot read steps of plan {}: {}", name, a.plan_id, e.what());
    }
  }
  const std::string phase(core::to_string(a.phase));
  std::map<std::string, std::string> env{
      {"FAILOVER_GROUP", name},
      {"FAILOVER_PHASE", phase},
      {"FAILOVER_FROM", std::string(core::to_string(a.from))},
      {"FAILOVER_TO", std::string(core::to_string(a.to))},
      {"FAILOVER_PLAN_ID", std::to_string(a.plan_id)},
      {"FAILOVER_INITIATOR", std::string(core::to_string(a.initiator))},
      {"FAILOVER_TERM", std::to_string(a.term)},
  };
  if (a.repair)
    spdlog::warn("group {}: repairing drift with the {} steps (plan {})", name, phase, a.plan_id);
  if (a.phase == Phase::warm)
    platform::journal_event(events::kWarm, LOG_NOTICE, "group " + name + ": warming secondary",
                            {{"GROUP", name}, {"PLAN_ID", std::to_string(a.plan_id)}});
  if (a.phase == Phase::cool)
    platform::journal_event(events::kCool, LOG_NOTICE, "group " + name + ": cooling secondary",
                            {{"GROUP", name}, {"PLAN_ID", std::to_string(a.plan_id)}});
  spdlog::info("group {}: running {} plan {} ({} steps{})", name, phase, a.plan_id,
               g.cfg.steps_for(a.phase).size(), a.resume ? ", resumed" : "");
  auto run = std::make_unique<PlanRun>();
  run->request = a;
  const std::string initiator(core::to_string(a.initiator));
  Group* gp = &g;
  const std::vector<config::Step>& steps = g.cfg.steps_for(a.phase);

  actions::StepContext ctx;
  ctx.group = name;
  ctx.phase = a.phase;
  ctx.target = a.to;
  ctx.from = a.from;
  ctx.plan_id = a.plan_id;
  ctx.term = a.term;
  // An operator's command overrides the gates that guard automatic action (replication lag);
  // the step says so in its detail and history.
  ctx.forced = a.initiator == core::Initiator::operator_;
  ctx.env = env;
  ctx.reason = g.reason;
  ctx.initiator = initiator;

  actions::PlanOptions options;
  options.prechecks = !a.resume;
  options.already_done = done;
  options.retry = options_.retry;
  if (a.repair && a.plan_id == g.repair_plan_id && !g.repair_steps.empty())
    options.only = g.repair_steps;

  actions::PlanHooks hooks;
  hooks.on_step = [this, name, a, phase, initiator](const actions::StepEvent& e) {
    record_step(name, a, e);
  };
  hooks.on_done = [this, gp](actions::PlanOutcome o) { plan_done(*gp, o); };
  hooks.intent_begin = [this, name, a, phase, &steps](std::size_t i, const std::string& key) {
    store::Intent in;
    in.group = name;
    in.plan_id = a.plan_id;
    in.step_index = static_cast<int>(i);
    in.idempotency_key = key;
    in.phase = phase;
    in.step_name = i < steps.size() ? steps[i].name : "";
    in.kind = i < steps.size() ? steps[i].kind : "";
    in.term = a.term;
    in.started_ms = core::to_ms(now());
    std::string err = intents_->begin(in);
    // A forced (operator) plan must work when everything else is broken, the store included.
    if (!err.empty() && a.initiator == core::Initiator::operator_) {
      spdlog::error(
          "group {}: intent log unavailable ({}); running the operator's plan {} "
          "without it",
          name, err, a.plan_id);
      return std::string();
    }
    return err;
  };
  hooks.intent_done = [this, name, a](std::size_t i, const actions::StepOutcome& o) {
    std::string err =
        intents_->done(name, a.plan_id, static_cast<int>(i), core::to_ms(now()), o.detail);
    if (!err.empty() && a.initiator == core::Initiator::operator_) {
      spdlog::error("group {}: intent log unavailable ({}); continuing the operator's plan {}",
                    name, err, a.plan_id);
      return std::string();
    }
    return err;
  };
  run->runner = std::make_unique<actions::PlanRunner>(
      event_.get(), *step_registry_, steps, std::move(ctx), std::move(options), std::move(hooks));
  g.running = std::move(run);
  g.running->runner->start();
}

void Daemon::plan_done(Group& g, const actions::PlanOutcome& outcome) {
  const core::ActionRequest a = g.running->request;
  const std::string& name = g.cfg.name;
  const std::string phase(core::to_string(a.phase));
  spdlog::log(outcome.ok ? spdlog::level::info : spdlog::level::err, "group {}: {} plan {} {}: {}",
              name, phase, a.plan_id, outcome.ok ? "done" : "FAILED", outcome.detail);
  metrics_->count_plan(name, a.phase, outcome.ok);
  if (a.repair) {
    // A repair changes no state: the next observation tells whether it held.
    platform::journal_event(events::kReconcileDrift, outcome.ok ? LOG_NOTICE : LOG_ERR,
                            "group " + name + ": drift repair (plan " + std::to_string(a.plan_id) +
                                ") " + (outcome.ok ? "done: " : "FAILED: ") + outcome.detail,
                            {{"GROUP", name},
                             {"PLAN_ID", std::to_string(a.plan_id)},
                             {"ACTIVE", std::string(core::to_string(a.to))},
                             {"RESULT", outcome.ok ? "repaired" : "failed"},
                             {"DETAIL", outcome.detail}});
  } else if (a.phase == Phase::failover || a.phase == Phase::failback) {
    const bool over = a.phase == Phase::failover;
    platform::journal_event(
        over ? (outcome.ok ? events::kFailoverFinished : events::kFailoverFailed)
             : (outcome.ok ? events::kFailbackFinished : events::kFailbackFailed),
        outcome.ok ? LOG_NOTICE : LOG_ERR,
        "group " + name + ": " + phase + " plan " + std::to_string(a.plan_id) +
            (outcome.ok ? " finished: " : " failed: ") + outcome.detail,
        {{"GROUP", name}, {"PLAN_ID", std::to_string(a.plan_id)}, {"DETAIL", outcome.detail}});
    core::PlanResult r{now(), a.phase, a.plan_id, outcome.ok, outcome.detail};
    apply(g, core::plan_finished(g.state, r, g.cfg.policy), std::nullopt);
    update_status();
  }
  // We are inside the runner's own callback: free it from the loop, not from here.
  g.retired = std::move(g.running);
  g.plan_kick->schedule();
}

void Daemon::schedule_reconcile(Group& g) {
  const Millis every = g.cfg.policy.reconcile_interval;
  if (every.count() > 0 && !stopping_) g.reconcile_timer->arm_in(every);
}

// Observes, changing nothing, whether the effect of the plan that made the active site serve
// is in place. Skipped while a plan runs or is queued (the world is changing on purpose) and
// while the group is held (a human owns it).
void Daemon::start_reconcile(Group& g) {
  g.observer_retired.reset();
  schedule_reconcile(g);
  if (stopping_ || g.observer || g.running || !g.plans.empty()) return;
  if (g.state.state == State::held || g.state.plan_phase) return;
  const Phase phase = g.state.active == Site::secondary ? Phase::failover : Phase::failback;
  const std::vector<config::Step>& steps = g.cfg.steps_for(phase);
  if (steps.empty()) return;
  actions::StepContext ctx;
  ctx.group = g.cfg.name;
  ctx.phase = phase;
  ctx.target = g.state.active;
  ctx.from = g.state.active == Site::secondary ? Site::primary : Site::secondary;
  ctx.term = g.state.term;
  actions::PlanOptions options;
  options.mode = actions::PlanMode::observe;
  actions::PlanHooks hooks;
  const std::string name = g.cfg.name;
  // Only differences are recorded: an observation every minute that finds nothing would bury
  // the history.
  Group* gp = &g;
  gp->drift_events.clear();
  hooks.on_step = [this, gp, name](const actions::StepEvent& e) {
    if (!e.finished || e.result == "ok") return;
    gp->drift_events.push_back(e);
    metrics_->count_reconcile_drift(name, e.kind);
  };
  hooks.on_done = [this, gp](actions::PlanOutcome o) { reconcile_done(*gp, o); };
  g.observer = std::make_unique<actions::PlanRunner>(
      event_.get(), *step_registry_, steps, std::move(ctx), std::move(options), std::move(hooks));
  g.observer->start();
}

void Daemon::reconcile_done(Group& g, const actions::PlanOutcome& outcome) {
  // We are inside the observer's callback: free it on a later iteration.
  g.observer_retired = std::move(g.observer);
  const std::string& name = g.cfg.name;
  if (outcome.ok) {
    if (!g.last_drift.empty()) spdlog::info("group {}: no drift any more", name);
    g.last_drift.clear();
    return;
  }
  std::string drift = outcome.detail;
  g.last_drift = drift;
  core::Decision d = core::drift_found(g.state, {now(), drift}, g.cfg.policy);
  const uint64_t plan_id = d.actions.empty() ? 0 : d.actions.front().plan_id;
  spdlog::warn("group {}: {}", name, d.reason);
  platform::journal_event(events::kReconcileDrift, LOG_WARNING, "group " + name + ": " + d.reason,
                          {{"GROUP", name},
                           {"ACTIVE", std::string(core::to_string(g.state.active))},
                           {"DRIFT", drift},
                           {"PLAN_ID", std::to_string(plan_id)},
                           {"RESULT", d.actions.empty() ? "not repaired" : "repairing"}});
  if (!d.actions.empty()) {
    g.repair_plan_id = plan_id;
    g.repair_steps.clear();
    g.repair_steps.insert(outcome.drift_steps.begin(), outcome.drift_steps.end());
  }
  // Recorded under the repair's plan id; a drift that is not repaired (held, flap guard) keeps
  // plan id 0, where each observation replaces the previous one (the journal has them all).
  core::ActionRequest a;
  a.phase = g.state.active == Site::secondary ? Phase::failover : Phase::failback;
  a.to = g.state.active;
  a.from = g.state.active == Site::secondary ? Site::primary : Site::secondary;
  a.term = g.state.term;
  a.plan_id = plan_id;
  for (const actions::StepEvent& e : g.drift_events) record_step(name, a, e);
  g.drift_events.clear();
  if (d.accepted) apply(g, d, std::nullopt);
  update_status();
}

}  // namespace fo
