// Daemon loop: rounds of probes per group, decisions, plans, records, notifications, reload.
#include "daemon/daemon.hpp"

#include <spdlog/spdlog.h>
#include <syslog.h>
#include <unistd.h>

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
  intents_ = std::make_unique<store::IntentLog>(config_.daemon.state_db);
  build_step_registry();
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
  for (auto& [name, g] : groups_) {
    g->running.reset();
    g->observer.reset();
  }
  groups_.clear();
  step_registry_.reset();  // plugins hold the loop's D-Bus/curl/exec resources
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
  g->reconcile_timer =
      std::make_unique<platform::Timer>(event_.get(), [this, raw] { start_reconcile(*raw); });
  schedule_reconcile(*g);
  // An interrupted plan resumes at its first unverified step; nothing verified runs again.
  for (const auto& a : core::resume_actions(g->state)) {
    spdlog::warn("group {}: resuming {} plan {} interrupted by a restart", cfg.name,
                 core::to_string(a.phase), a.plan_id);
    enqueue(*g, a);
  }
  schedule_round(*g, Millis(0));
  groups_[cfg.name] = std::move(g);
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

}  // namespace fo
