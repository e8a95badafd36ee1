// Daemon loop: rounds of probes per group, decisions, plans, records, notifications, reload.
#include "daemon/daemon.hpp"

#include <spdlog/spdlog.h>
#include <syslog.h>
#include <unistd.h>

#include <random>
#include <set>

#include "daemon/daemon_group.hpp"
#include "daemon/events.hpp"
#include "daemon/platform/journal.hpp"
#include "daemon/platform/notify.hpp"

namespace fo {

using core::Millis;
using core::Phase;
using core::Site;
using core::State;

namespace {

std::string locations_text(const core::SiteHealth& h) {
  std::string out;
  for (const auto& l : h.locations) {
    if (!out.empty()) out += ",";
    out += l.location + "=" +
           (l.verdict == core::Verdict::healthy     ? "h"
            : l.verdict == core::Verdict::unhealthy ? "u"
                                                    : "m");
  }
  return out;
}

// Random spread of round timers so groups and rounds do not fire in bursts.
Millis jitter(Millis interval) {
  static std::mt19937_64 rng{std::random_device{}()};
  const int64_t span = std::min<int64_t>(interval.count() / 20, 500);
  if (span <= 0) return Millis(0);
  return Millis(std::uniform_int_distribution<int64_t>(-span, span)(rng));
}

std::string_view event_id_for(const core::Transition& t) {
  switch (t.to) {
    case State::failing_over:
      return events::kFailoverStarted;
    case State::failing_back:
      return events::kFailbackStarted;
    case State::held:
      return events::kHeld;
    default:
      return events::kTransition;
  }
}

}  // namespace

Daemon::Daemon(DaemonOptions options, config::Config config)
    : options_(std::move(options)), config_(std::move(config)) {
  event_ = platform::make_event();
  store_ = store::Store::open(config_.daemon.state_db, config_.daemon.store_queue_limit);
  curl_ = std::make_unique<platform::CurlMulti>(event_.get());
  exec_ = std::make_unique<actions::ExecRunner>(event_.get());
  probes_ = std::make_unique<probes::ProbeDispatcher>(event_.get(), *curl_, *exec_);
  started_ = now();
  metrics_ = std::make_unique<metrics::DaemonMetrics>(FAILOVERD_VERSION, started_);
  if (!config_.daemon.metrics_listen.empty())
    metrics_server_ = std::make_unique<metrics::MetricsServer>(
        event_.get(), config_.daemon.metrics_listen, [this] {
          const auto s = store_->stats();
          metrics_->set_store(s.queue_depth, s.written, s.write_errors, s.dropped_rounds);
          return metrics_->render();
        });
  const auto saved = store_->load_group_states();
  for (const auto& g : config_.groups) add_group(g, saved);
  control_ = std::make_unique<control::ControlServer>(
      event_.get(), config_.daemon.control_socket,
      [this](const control::Request& r) { return handle(r); });
}

Daemon::~Daemon() {
  // Plans first (their children are killed), then the probes, then the store drains.
  for (auto& [name, g] : groups_) g->running.reset();
  groups_.clear();
  control_.reset();
  metrics_server_.reset();
  probes_.reset();  // cancels exec checks, so before exec_
  exec_.reset();
  curl_.reset();
  if (store_ && !store_->flush(std::chrono::seconds(5)))
    spdlog::error("store: history still queued at exit: {} records", store_->stats().queue_depth);
}

core::Instant Daemon::now() const {
  return platform::wall_now(event_.get());
}

void Daemon::add_group(const config::Group& cfg, const std::map<std::string, std::string>& saved) {
  auto g = std::make_unique<Group>(cfg);
  if (auto it = saved.find(cfg.name); it != saved.end()) {
    if (auto st = core::deserialize(it->second)) {
      g->state = *st;
      g->saved_blob = it->second;
      spdlog::info("group {}: restored state {} (serving {})", cfg.name,
                   core::to_string(g->state.state), core::to_string(g->state.active));
    } else {
      spdlog::error("group {}: stored state is unreadable; starting as primary_active", cfg.name);
    }
  } else {
    g->state.since = now();
  }
  Group* raw = g.get();
  g->round_timer =
      std::make_unique<platform::Timer>(event_.get(), [this, raw] { start_round(*raw); });
  g->plan_kick =
      std::make_unique<platform::Defer>(event_.get(), [this, raw] { run_next_plan(*raw); });
  // An interrupted plan resumes at its first unverified step; nothing verified runs again.
  for (const auto& a : core::resume_actions(g->state)) {
    spdlog::warn("group {}: resuming {} plan {} interrupted by a restart", cfg.name,
                 core::to_string(a.phase), a.plan_id);
    enqueue(*g, a);
  }
  schedule_round(*g, Millis(0));
  groups_[cfg.name] = std::move(g);
}

void Daemon::schedule_round(Group& g, Millis delay) {
  g.round_timer->arm_in(std::max(Millis(0), delay + jitter(delay)));
}

void Daemon::start_round(Group& g) {
  if (stopping_) return;
  if (g.in_flight > 0) {  // never two rounds of the same probes at once
    g.round_pending = true;
    return;
  }
  g.round_pending = false;
  g.round_started_mono = platform::mono_now(event_.get());
  g.round_started_wall = now();
  const uint64_t gen = g.round_generation = ++generation_;
  const std::string name = g.cfg.name;
  for (const auto& loc_name : g.cfg.locations) {
    const config::Location* loc = config_.find_location(loc_name);
    if (!loc) continue;
    for (Site site : {Site::primary, Site::secondary}) {
      const config::Site& s = site == Site::primary ? g.cfg.primary : g.cfg.secondary;
      for (const auto& probe : s.probes) {
        ++g.in_flight;
        probes_->start(
            probe, *loc,
            [this, name, gen, site, loc_name, probe_name = probe.name](probes::ProbeResult r) {
              auto it = groups_.find(name);
              if (it == groups_.end()) return;
              Group& grp = *it->second;
              if (gen != grp.round_generation) return;
              grp.board.record({now(), site, loc_name, probe_name, r.ok});
              if (!r.ok)
                spdlog::debug("group {}: {} probe {} from {} failed: {}", name,
                              core::to_string(site), probe_name, loc_name, r.error);
              grp.last_results[{int(site), loc_name, probe_name}] = std::move(r);
              if (--grp.in_flight == 0) finish_round(grp);
            });
      }
    }
  }
  if (g.in_flight == 0) finish_round(g);
}

void Daemon::finish_round(Group& g) {
  const core::Instant t = now();
  const auto& policy = g.cfg.policy;
  core::RoundInput in{t, g.board.health(Site::primary, t, policy),
                      g.board.health(Site::secondary, t, policy)};
  core::Decision d = core::decide(g.state, in, policy);
  g.primary = in.primary;
  g.secondary = in.secondary;
  g.have_round = true;
  ++g.rounds;
  metrics_->count_round(g.cfg.name);
  metrics_->set_site_health(g.cfg.name, Site::primary, in.primary);
  metrics_->set_site_health(g.cfg.name, Site::secondary, in.secondary);
  apply(g, d, std::nullopt);
  store_->record_round({core::to_ms(t), g.cfg.name, std::string(core::to_string(g.state.state)),
                        in.primary.healthy, in.primary.reporting, in.primary.configured,
                        in.primary.known, in.secondary.healthy, in.secondary.reporting,
                        in.secondary.configured, in.secondary.known, locations_text(in.primary),
                        locations_text(in.secondary)});
  update_status();
  // The next round is due one interval after this one started, whatever the probes took.
  const Millis elapsed = platform::mono_now(event_.get()) - g.round_started_mono;
  schedule_round(g, core::round_interval(g.state, policy) - elapsed);
  if (g.round_pending) start_round(g);
}

void Daemon::apply(Group& g, const core::Decision& d, std::optional<uint32_t> uid) {
  const std::string& name = g.cfg.name;
  if (d.transition) {
    const auto& t = *d.transition;
    metrics_->count_transition(name, t.from, t.to, t.initiator);
    const std::string from(core::to_string(t.from)), to(core::to_string(t.to));
    spdlog::info("group {}: {} -> {}: {}", name, from, to, d.reason);
    store_->record_transition({core::to_ms(d.next.since), name, from, to, d.reason,
                               std::string(core::to_string(t.initiator)), uid, d.next.term,
                               std::string(core::to_string(d.next.active))});
    std::vector<platform::JournalField> fields{
        {"GROUP", name},
        {"FROM", from},
        {"TO", to},
        {"REASON", d.reason},
        {"INITIATOR", std::string(core::to_string(t.initiator))},
        {"ACTIVE", std::string(core::to_string(d.next.active))}};
    if (uid) fields.push_back({"OPERATOR_UID", std::to_string(*uid)});
    platform::journal_event(event_id_for(t), t.to == State::held ? LOG_WARNING : LOG_NOTICE,
                            "group " + name + ": " + from + " -> " + to + ": " + d.reason, fields);
  } else if (d.reason != g.reason) {
    spdlog::info("group {}: {}", name, d.reason);
  }
  if (d.alert && d.reason != g.reason) {
    platform::journal_event(events::kAlert, LOG_ALERT, "group " + name + ": " + d.reason,
                            {{"GROUP", name}, {"REASON", d.reason}});
  }
  g.reason = d.reason;
  g.state = d.next;
  metrics_->set_group_state(name, g.state.state);
  metrics_->set_active(name, g.state.active);
  save_state(g);
  for (const auto& a : d.actions) enqueue(g, a);
}

void Daemon::save_state(Group& g) {
  std::string blob = core::serialize(g.state);
  if (blob == g.saved_blob) return;
  g.saved_blob = blob;
  store_->save_group_state(g.cfg.name, std::move(blob), core::to_ms(now()));
}

void Daemon::enqueue(Group& g, const core::ActionRequest& a) {
  g.plans.push_back(a);
  g.plan_kick->schedule();
}

void Daemon::run_next_plan(Group& g) {
  g.retired.reset();
  if (g.running || g.plans.empty() || stopping_) return;
  core::ActionRequest a = g.plans.front();
  g.plans.pop_front();
  const std::string& name = g.cfg.name;
  std::set<size_t> done;
  if (a.resume) {
    try {
      for (const auto& s : store_->plan_steps(name, a.plan_id))
        if (s.result == "ok") done.insert(size_t(s.step_index));
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
  run->runner = std::make_unique<actions::PlanRunner>(
      event_.get(), *exec_, g.cfg.steps_for(a.phase), env, done, options_.retry,
      [this, name, a, phase, initiator](const actions::StepEvent& e) {
        const int64_t t = core::to_ms(now());
        store::ActionRecord r;
        r.group = name;
        r.plan_id = a.plan_id;
        r.phase = phase;
        r.step_index = int(e.index);
        r.step_name = e.name;
        r.kind = e.kind;
        r.attempt = e.attempt;
        r.started_ms = e.finished ? t - e.duration.count() : t;
        r.ended_ms = e.finished ? t : 0;
        r.result = e.result;
        r.exit_code = e.exit_code;
        r.output = e.output;
        r.initiator = initiator;
        r.term = a.term;
        store_->record_action(std::move(r));
        if (e.finished)
          metrics_->observe_step(name, a.phase, e.name, e.result, e.duration.count() / 1000.0);
        if (e.finished && e.result != "ok" && e.result != "skipped") {
          spdlog::warn("group {}: {} step {} ({}) attempt {}: {}", name, phase, e.index, e.name,
                       e.attempt, e.detail);
          platform::journal_event(
              events::kActionFailed, LOG_WARNING,
              "group " + name + ": " + phase + " step " + e.name + " " + e.result + ": " + e.detail,
              {{"GROUP", name},
               {"PHASE", phase},
               {"STEP", e.name},
               {"ATTEMPT", std::to_string(e.attempt)},
               {"RESULT", e.result}});
        } else if (e.finished) {
          spdlog::info("group {}: {} step {} ({}) {}", name, phase, e.index, e.name, e.result);
        }
      },
      [this, gp](actions::PlanOutcome o) { plan_done(*gp, o); });
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
  if (a.phase == Phase::failover || a.phase == Phase::failback) {
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

}  // namespace fo
