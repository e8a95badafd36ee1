// Round evaluation of the decision engine: warm early, fail over on a quorum of locations for
// N rounds, fail back only after a stable window, and hold for a human when it would flap.
//
// Safety invariants (asserted by tests/core):
//  - no automatic transition on unknown health (too few reporting locations);
//  - no automatic failover unless the secondary is known healthy;
//  - at most one failover/failback plan in flight per group, and a plan's result only counts
//    for the plan that was started (plan_id);
//  - automatic failovers/failbacks within flap_window never exceed flap_limit.
#include <cstdio>

#include "engine.hpp"
#include "engine_detail.hpp"

namespace fo::core {

using detail::pct;

namespace {

std::string site_text(const SiteHealth& h) {
  return h.fraction();
}

// Updates the level trackers from one round. Unknown data resets every run: a window that
// could not be observed is not a stable window, and silence is not an outage either.
bool full_view(const SiteHealth& h) {
  return h.reporting >= h.configured;
}

// "; 1 of 6 locations not reporting: not cooling on a partial view"
std::string missing_text(const SiteHealth& h) {
  return "; " + std::to_string(h.configured - h.reporting) + " of " + std::to_string(h.configured) +
         " locations not reporting: not cooling on a partial view";
}

void track(GroupState& s, const RoundInput& in, const Policy& p) {
  const SiteHealth& P = in.primary;
  const SiteHealth& S = in.secondary;
  const double pr = P.ratio();
  if (P.known && pr < p.failover_below)
    ++s.rounds_below;
  else
    s.rounds_below = 0;
  if (S.known && S.ratio() < p.failover_below)
    ++s.secondary_rounds_below;
  else
    s.secondary_rounds_below = 0;
  if (P.known && pr >= p.failback_above) {
    if (!s.primary_good_since) s.primary_good_since = in.now;
  } else {
    s.primary_good_since.reset();
  }
  // The cool window needs the whole view: a location that stopped reporting may be the one that
  // saw the primary fail. A partial view neither starts the window nor completes it (see
  // decide_on_primary), and does not restart it either: an agent's hiccup is not a dip.
  if (P.known && pr >= p.warm_below) {
    if (!s.recovered_since && full_view(P)) s.recovered_since = in.now;
  } else {
    s.recovered_since.reset();
  }
  if (P.known) s.primary_below_warm = pr < p.warm_below;
  while (!s.flap_times.empty() && in.now - s.flap_times.front() >= p.flap_window)
    s.flap_times.pop_front();
}

bool secondary_ready(const SiteHealth& S, const Policy& p) {
  return S.known && S.ratio() >= p.secondary_min;
}

// Dampening shared by automatic failover and failback. Returns a refusal sentence, or "".
std::string dampening(const GroupState& s, Instant now, const Policy& p) {
  if (s.last_transition && now - *s.last_transition < p.min_dwell)
    return "min_dwell " + format_duration(p.min_dwell) + " not reached (" +
           format_duration(now - *s.last_transition) + " since the last switch)";
  return "";
}

bool flap_guard_trips(const GroupState& s, const Policy& p) {
  return static_cast<int>(s.flap_times.size()) + 1 > p.flap_limit;
}

void enter(Decision& d, State to, Instant now, Initiator who) {
  d.transition = Transition{d.next.state, to, who};
  d.next.state = to;
  d.next.since = now;
}

void hold_for_flap(Decision& d, Instant now, const Policy& p, std::string_view what) {
  d.next.held_reason = "flap guard: " + std::string(what) + " would be automatic switch " +
                       std::to_string(d.next.flap_times.size() + 1) + " within " +
                       format_duration(p.flap_window) + " (flap_limit " +
                       std::to_string(p.flap_limit) + ")";
  enter(d, State::held, now, Initiator::automatic);
  d.reason = "holding for a human: " + d.next.held_reason;
  d.alert = true;
}

ActionRequest start_plan(GroupState& s, Phase phase, Initiator who, Instant now) {
  s.plan_phase = phase;
  s.plan_id = s.next_plan_id++;
  s.plan_initiator = who;
  s.last_transition = now;
  if (who == Initiator::automatic) s.flap_times.push_back(now);
  ActionRequest a;
  a.phase = phase;
  a.plan_id = s.plan_id;
  a.initiator = who;
  a.from = phase == Phase::failover ? Site::primary : Site::secondary;
  a.to = phase == Phase::failover ? Site::secondary : Site::primary;
  a.term = s.term;
  return a;
}

// Warm and cool plans are fire-and-forget, but get an id too so their steps are recorded apart.
ActionRequest simple_action(GroupState& s, Phase phase, Initiator who) {
  ActionRequest a;
  a.phase = phase;
  a.plan_id = s.next_plan_id++;
  a.initiator = who;
  a.from = s.active;
  a.to = Site::secondary;  // the site being warmed or cooled
  a.term = s.term;
  return a;
}

void decide_on_primary(Decision& d, const RoundInput& in, const Policy& p) {
  GroupState& s = d.next;
  const SiteHealth& P = in.primary;
  const SiteHealth& S = in.secondary;
  if (!P.known) {
    d.reason = "primary health " + site_text(P) + ": no automatic transition on missing data";
    return;
  }
  const double pr = P.ratio();
  // Warm first, at the first point below warm_below: the secondary needs minutes to start.
  if (pr < p.warm_below && !s.secondary_warm) {
    s.secondary_warm = true;
    d.actions.push_back(simple_action(s, Phase::warm, Initiator::automatic));
    if (s.state == State::primary_active)
      enter(d, State::primary_degraded, in.now, Initiator::automatic);
    d.reason =
        "warming secondary: primary " + site_text(P) + " below warm_below " + pct(p.warm_below);
    return;
  }
  if (s.rounds_below >= p.failover_after) {
    const std::string down =
        "primary " + site_text(P) + " for " + std::to_string(s.rounds_below) + " rounds";
    if (!secondary_ready(S, p)) {
      d.reason = "both sites down: " + down + ", secondary " + site_text(S) +
                 " below secondary_min " + pct(p.secondary_min) + "; staying on primary";
      d.alert = true;
      return;
    }
    if (auto why = dampening(s, in.now, p); !why.empty()) {
      d.reason = "failover wanted (" + down + ") but " + why;
      d.alert = true;
      return;
    }
    if (flap_guard_trips(s, p)) {
      hold_for_flap(d, in.now, p, "failover");
      return;
    }
    d.actions.push_back(start_plan(s, Phase::failover, Initiator::automatic, in.now));
    enter(d, State::failing_over, in.now, Initiator::automatic);
    d.reason = "failing over: " + down + ", secondary " + site_text(S);
    return;
  }
  if (s.state == State::primary_degraded) {
    if (s.recovered_since && in.now - *s.recovered_since >= p.cool_after && full_view(P)) {
      s.secondary_warm = false;
      d.actions.push_back(simple_action(s, Phase::cool, Initiator::automatic));
      enter(d, State::primary_active, in.now, Initiator::automatic);
      d.reason = "cooling secondary: primary " + site_text(P) + " for " +
                 format_duration(in.now - *s.recovered_since);
      return;
    }
    if (s.recovered_since) {
      d.reason = "degraded, recovering: primary " + site_text(P) + " for " +
                 format_duration(in.now - *s.recovered_since) + " of " +
                 format_duration(p.cool_after) + ", secondary warm";
      if (!full_view(P)) d.reason += missing_text(P);
    } else if (P.known && pr >= p.warm_below) {
      d.reason = "degraded: primary " + site_text(P) + ", secondary " + site_text(S) + " warm" +
                 missing_text(P);
    } else {
      d.reason = "degraded: primary " + site_text(P) + ", secondary " + site_text(S) + " warm";
      if (s.rounds_below > 0)
        d.reason += "; " + std::to_string(s.rounds_below) + " of " +
                    std::to_string(p.failover_after) + " rounds below " + pct(p.failover_below);
    }
    return;
  }
  d.reason = "holding: primary " + site_text(P) + " healthy";
}

void decide_on_secondary(Decision& d, const RoundInput& in, const Policy& p) {
  GroupState& s = d.next;
  const SiteHealth& P = in.primary;
  const SiteHealth& S = in.secondary;
  // The serving secondary itself is down and the primary is up: going back is the only way
  // to serve, so the stable window does not apply (the flap guard still does).
  if (s.secondary_rounds_below >= p.failover_after && P.known && P.ratio() >= p.secondary_min) {
    if (flap_guard_trips(s, p)) {
      hold_for_flap(d, in.now, p, "emergency failback");
      return;
    }
    d.actions.push_back(start_plan(s, Phase::failback, Initiator::automatic, in.now));
    enter(d, State::failing_back, in.now, Initiator::automatic);
    d.reason = "failing back early: serving secondary " + site_text(S) + " for " +
               std::to_string(s.secondary_rounds_below) + " rounds, primary " + site_text(P);
    return;
  }
  if (s.secondary_rounds_below >= p.failover_after) {
    d.reason = "both sites down: serving secondary " + site_text(S) + ", primary " + site_text(P);
    d.alert = true;
    return;
  }
  if (p.failback == FailbackMode::manual) {
    d.reason = "serving from secondary; failback is manual: primary " + site_text(P);
    return;
  }
  if (!P.known) {
    d.reason =
        "serving from secondary: primary health " + site_text(P) + "; the stable window restarts";
    return;
  }
  if (!s.primary_good_since) {
    d.reason = "serving from secondary: primary " + site_text(P) + " below failback_above " +
               pct(p.failback_above);
    return;
  }
  const Millis stable = in.now - *s.primary_good_since;
  if (stable < p.failback_stable) {
    d.reason = "serving from secondary: primary " + site_text(P) + " stable for " +
               format_duration(stable) + " of " + format_duration(p.failback_stable);
    return;
  }
  if (auto why = dampening(s, in.now, p); !why.empty()) {
    d.reason = "failback wanted (primary stable for " + format_duration(stable) + ") but " + why;
    return;
  }
  if (flap_guard_trips(s, p)) {
    hold_for_flap(d, in.now, p, "failback");
    return;
  }
  d.actions.push_back(start_plan(s, Phase::failback, Initiator::automatic, in.now));
  enter(d, State::failing_back, in.now, Initiator::automatic);
  d.reason = "failing back: primary " + site_text(P) + " stable for " + format_duration(stable);
}

}  // namespace

Decision decide(const GroupState& state, const RoundInput& in, const Policy& policy) {
  Decision d;
  d.next = state;
  track(d.next, in, policy);
  const GroupState& s = d.next;
  switch (s.state) {
    case State::held:
      d.reason = "held (" + s.held_reason + "): serving " + std::string(to_string(s.active)) +
                 ", primary " + site_text(in.primary) + ", secondary " + site_text(in.secondary);
      break;
    case State::failing_over:
    case State::failing_back:
      d.reason = std::string(s.state == State::failing_over ? "failing over" : "failing back") +
                 ": plan " + std::to_string(s.plan_id) + " in progress; primary " +
                 site_text(in.primary) + ", secondary " + site_text(in.secondary);
      break;
    case State::primary_active:
    case State::primary_degraded:
      decide_on_primary(d, in, policy);
      break;
    case State::secondary_active:
      decide_on_secondary(d, in, policy);
      break;
  }
  return d;
}

Millis round_interval(const GroupState& state, const Policy& policy) {
  return state.primary_below_warm ? policy.degraded_interval : policy.interval;
}

bool transition_allowed(State from, State to) {
  using S = State;
  switch (from) {
    case S::primary_active:
      return to == S::primary_degraded || to == S::failing_over || to == S::held;
    case S::primary_degraded:
      return to == S::primary_active || to == S::failing_over || to == S::held;
    case S::failing_over:
      return to == S::secondary_active || to == S::held;
    case S::secondary_active:
      return to == S::failing_back || to == S::held;
    case S::failing_back:
      return to == S::primary_degraded || to == S::held;
    case S::held:
      return to != S::held;
  }
  return false;
}

std::vector<ActionRequest> resume_actions(const GroupState& state) {
  if (!state.plan_phase) return {};
  ActionRequest a;
  a.phase = *state.plan_phase;
  a.plan_id = state.plan_id;
  a.initiator = state.plan_initiator;
  a.from = a.phase == Phase::failover ? Site::primary : Site::secondary;
  a.to = a.phase == Phase::failover ? Site::secondary : Site::primary;
  a.term = state.term;
  a.resume = true;
  return {a};
}

}  // namespace fo::core
