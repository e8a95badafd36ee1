// Discrete-event loop around the engine. Order at equal times: observations already fed,
// then plan completions, then operator commands, then rounds (groups in name order).
#include "simulator.hpp"

#include <algorithm>
#include <stdexcept>

namespace fo::core {
namespace {

SimEvent event(SimEvent::Kind kind, Instant t, const std::string& group) {
  SimEvent e;
  e.kind = kind;
  e.t = t;
  e.group = group;
  return e;
}

}  // namespace

Simulator::Simulator(std::vector<SimGroup> groups, Instant start) : now_(start) {
  for (auto& cfg : groups) {
    HealthBoard board(cfg.locations, cfg.primary_probes, cfg.secondary_probes);
    std::string name = cfg.name;
    G g{std::move(cfg), std::move(board)};
    g.state.since = start;
    g.next_round = start + g.cfg.policy.interval;
    g.summary.group = name;
    groups_.emplace(name, std::move(g));
  }
}

void Simulator::restore(const std::string& group, const GroupState& state) {
  auto it = groups_.find(group);
  if (it == groups_.end()) throw std::invalid_argument("unknown group " + group);
  G& g = it->second;
  g.state = state;
  for (const auto& a : resume_actions(state)) {
    Decision d;
    d.next = g.state;
    d.actions.push_back(a);
    apply(g, d, now_);
  }
}

bool Simulator::observe(const std::string& group, const Observation& o) {
  auto it = groups_.find(group);
  if (it == groups_.end()) return false;
  run_until(o.at - Millis(1));
  it->second.board.record(o);
  return true;
}

void Simulator::schedule(SimCommand c) {
  if (c.at < now_) throw std::invalid_argument("command scheduled in the simulated past");
  commands_.push_back(std::move(c));
  std::stable_sort(commands_.begin(), commands_.end(),
                   [](const SimCommand& a, const SimCommand& b) { return a.at < b.at; });
}

const GroupState& Simulator::state(const std::string& group) const {
  return groups_.at(group).state;
}

void Simulator::apply(G& g, const Decision& d, Instant t) {
  if (d.transition) {
    SimEvent e = event(SimEvent::Kind::transition, t, g.cfg.name);
    e.from = d.transition->from;
    e.to = d.transition->to;
    e.initiator = d.transition->initiator;
    e.reason = d.reason;
    events_.push_back(std::move(e));
    if (d.transition->to == State::held) ++g.summary.holds;
  }
  if (d.alert) ++g.summary.alerts;
  g.state = d.next;
  for (const auto& a : d.actions) {
    if (a.phase == Phase::warm && !g.summary.first_warm) g.summary.first_warm = t;
    for (const auto& step : g.cfg.step_names[static_cast<int>(a.phase)]) {
      SimEvent e = event(SimEvent::Kind::action, t, g.cfg.name);
      e.phase = a.phase;
      e.step = step;
      events_.push_back(std::move(e));
    }
    if (g.cfg.step_names[static_cast<int>(a.phase)].empty()) {
      SimEvent e = event(SimEvent::Kind::action, t, g.cfg.name);
      e.phase = a.phase;
      events_.push_back(std::move(e));
    }
    if (a.phase == Phase::failover || a.phase == Phase::failback) {
      PlanResult r;
      r.now = t + g.cfg.plan_duration;
      r.phase = a.phase;
      r.plan_id = a.plan_id;
      r.ok = !g.cfg.plans_fail;
      r.detail = r.ok ? "(simulated)" : "simulated step failure";
      g.pending = r;
      g.plan_done_at = r.now;
    }
  }
}

// Downtime integrates piecewise: from each mark (a round or a switch) to the next, counted when
// the site serving in between was known to be below failover_below.
void Simulator::account(G& g, Instant t) {
  if (g.mark && g.serving_down) g.summary.downtime += t - *g.mark;
  g.mark = t;
}

void Simulator::update_serving(G& g) {
  const SiteHealth& serving = g.state.active == Site::primary ? g.last_primary : g.last_secondary;
  g.serving_down = serving.known && serving.ratio() < g.cfg.policy.failover_below;
}

void Simulator::round(G& g, Instant t) {
  RoundInput in{t, g.board.health(Site::primary, t, g.cfg.policy),
                g.board.health(Site::secondary, t, g.cfg.policy)};
  account(g, t);
  Decision d = decide(g.state, in, g.cfg.policy);
  apply(g, d, t);
  g.last_primary = in.primary;
  g.last_secondary = in.secondary;
  update_serving(g);
  if (record_rounds) {
    SimEvent e = event(SimEvent::Kind::round, t, g.cfg.name);
    e.primary = in.primary;
    e.secondary = in.secondary;
    e.state = g.state.state;
    e.active = g.state.active;
    e.reason = d.reason;
    events_.push_back(std::move(e));
  }
  g.next_round = t + round_interval(g.state, g.cfg.policy);
}

void Simulator::run_until(Instant t) {
  for (;;) {
    // Earliest due item across groups and commands.
    std::optional<Instant> next;
    auto consider = [&](Instant x) {
      if (x <= t && (!next || x < *next)) next = x;
    };
    for (auto& [name, g] : groups_) {
      if (g.plan_done_at) consider(*g.plan_done_at);
      consider(g.next_round);
    }
    if (!commands_.empty()) consider(commands_.front().at);
    if (!next) break;
    const Instant at = *next;
    now_ = at;
    bool did = false;
    for (auto& [name, g] : groups_) {
      if (g.plan_done_at && *g.plan_done_at == at) {
        PlanResult r = *g.pending;
        g.pending.reset();
        g.plan_done_at.reset();
        Decision d = plan_finished(g.state, r, g.cfg.policy);
        if (d.accepted && r.ok) {
          if (r.phase == Phase::failover)
            ++g.summary.failovers;
          else
            ++g.summary.failbacks;
        }
        account(g, at);
        apply(g, d, at);
        update_serving(g);  // the serving site may have changed with the plan
        did = true;
      }
    }
    if (did) continue;
    if (!commands_.empty() && commands_.front().at == at) {
      SimCommand c = commands_.front();
      commands_.erase(commands_.begin());
      auto it = groups_.find(c.group);
      if (it != groups_.end()) {
        G& g = it->second;
        CommandInput in{at,
                        c.command,
                        c.force,
                        g.board.health(Site::primary, at, g.cfg.policy),
                        g.board.health(Site::secondary, at, g.cfg.policy),
                        "simulation",
                        c.why};
        Decision d = apply_command(g.state, in, g.cfg.policy);
        if (d.accepted) apply(g, d, at);
      }
      continue;
    }
    for (auto& [name, g] : groups_)
      if (g.next_round == at) round(g, at);
  }
  if (now_ < t) now_ = t;
}

std::vector<SimSummary> Simulator::summaries() const {
  std::vector<SimSummary> out;
  for (const auto& [name, g] : groups_) {
    SimSummary s = g.summary;
    if (g.mark && g.serving_down && now_ > *g.mark) s.downtime += now_ - *g.mark;
    out.push_back(s);
  }
  return out;
}

}  // namespace fo::core
