// Operator commands and plan results: the non-round inputs of the decision engine.
// Operator commands bypass dampening and the flap guard but never run two plans at once.
#include "engine.hpp"
#include "engine_detail.hpp"

namespace fo::core {

using detail::pct;

std::string_view to_string(Command c) {
  switch (c) {
    case Command::failover:
      return "failover";
    case Command::failback:
      return "failback";
    case Command::hold:
      return "hold";
    case Command::release:
      return "release";
  }
  return "?";
}

namespace {

Decision refuse(const GroupState& s, std::string why) {
  Decision d;
  d.next = s;
  d.accepted = false;
  d.reason = std::move(why);
  return d;
}

void enter(Decision& d, State to, Instant now, Initiator who) {
  d.transition = Transition{d.next.state, to, who};
  d.next.state = to;
  d.next.since = now;
}

ActionRequest plan_request(GroupState& s, Phase phase, Instant now) {
  s.plan_phase = phase;
  s.plan_id = s.next_plan_id++;
  s.plan_initiator = Initiator::operator_;
  s.last_transition = now;
  ActionRequest a;
  a.phase = phase;
  a.plan_id = s.plan_id;
  a.initiator = Initiator::operator_;
  a.from = phase == Phase::failover ? Site::primary : Site::secondary;
  a.to = phase == Phase::failover ? Site::secondary : Site::primary;
  a.term = s.term;
  return a;
}

std::string by(const CommandInput& in) {
  std::string t = "operator " + (in.who.empty() ? std::string("unknown") : in.who);
  if (!in.why.empty()) t += ": " + in.why;
  return t;
}

}  // namespace

Decision apply_command(const GroupState& state, const CommandInput& in, const Policy& policy) {
  const bool held = state.state == State::held;
  const std::string busy = state.plan_phase
                               ? "plan " + std::to_string(state.plan_id) + " (" +
                                     std::string(to_string(*state.plan_phase)) + ") is in progress"
                               : "";
  switch (in.command) {
    case Command::hold: {
      if (held) return refuse(state, "already held: " + state.held_reason);
      Decision d;
      d.next = state;
      d.next.held_reason = "hold by " + by(in);
      enter(d, State::held, in.now, Initiator::operator_);
      d.reason = "held by " + by(in) + "; automatic transitions stopped";
      return d;
    }
    case Command::release: {
      if (!held)
        return refuse(state, "not held (state " + std::string(to_string(state.state)) + ")");
      Decision d;
      d.next = state;
      State to;
      if (state.plan_phase)
        to = *state.plan_phase == Phase::failover ? State::failing_over : State::failing_back;
      else if (state.active == Site::primary)
        to = state.secondary_warm ? State::primary_degraded : State::primary_active;
      else
        to = State::secondary_active;
      // A human has looked: windows restart from now and the flap history is cleared.
      d.next.held_reason.clear();
      d.next.flap_times.clear();
      d.next.rounds_below = 0;
      d.next.secondary_rounds_below = 0;
      d.next.primary_good_since.reset();
      d.next.recovered_since.reset();
      enter(d, to, in.now, Initiator::operator_);
      d.reason = "released by " + by(in) + "; automation resumes in " + std::string(to_string(to));
      return d;
    }
    case Command::failover: {
      if (!busy.empty()) return refuse(state, busy);
      if (state.active == Site::secondary) return refuse(state, "already serving from secondary");
      const SiteHealth& S = in.secondary;
      if (!in.force && !(S.known && S.ratio() >= policy.secondary_min))
        return refuse(state, "secondary " + S.fraction() + " is not healthy (secondary_min " +
                                 pct(policy.secondary_min) + "); use --force to fail over anyway");
      Decision d;
      d.next = state;
      if (!d.next.secondary_warm) {
        d.next.secondary_warm = true;
        ActionRequest warm;
        warm.phase = Phase::warm;
        warm.plan_id = d.next.next_plan_id++;
        warm.initiator = Initiator::operator_;
        warm.from = state.active;
        warm.to = Site::secondary;
        warm.term = state.term;
        d.actions.push_back(warm);
      }
      d.actions.push_back(plan_request(d.next, Phase::failover, in.now));
      if (!held) enter(d, State::failing_over, in.now, Initiator::operator_);
      d.reason = std::string(in.force ? "forced " : "") + "failover by " + by(in) + ": primary " +
                 in.primary.fraction() + ", secondary " + S.fraction() +
                 (held ? " (group stays held)" : "");
      return d;
    }
    case Command::failback: {
      if (!busy.empty()) return refuse(state, busy);
      if (state.active == Site::primary) return refuse(state, "already serving from primary");
      const SiteHealth& P = in.primary;
      if (!in.force && !(P.known && P.ratio() >= policy.secondary_min))
        return refuse(state, "primary " + P.fraction() + " is not healthy (needs " +
                                 pct(policy.secondary_min) + "); use --force to fail back anyway");
      Decision d;
      d.next = state;
      d.actions.push_back(plan_request(d.next, Phase::failback, in.now));
      if (!held) enter(d, State::failing_back, in.now, Initiator::operator_);
      d.reason = std::string(in.force ? "forced " : "") + "failback by " + by(in) + ": primary " +
                 P.fraction() + (held ? " (group stays held)" : "");
      return d;
    }
  }
  return refuse(state, "unknown command");
}

Decision plan_finished(const GroupState& state, const PlanResult& in, const Policy& policy) {
  (void)policy;
  Decision d;
  d.next = state;
  if (!state.plan_phase || state.plan_id != in.plan_id || *state.plan_phase != in.phase) {
    d.reason = "ignored result of plan " + std::to_string(in.plan_id) + " (not in flight)";
    d.accepted = false;
    return d;
  }
  GroupState& s = d.next;
  const bool over = in.phase == Phase::failover;
  const bool held = s.state == State::held;
  s.plan_phase.reset();
  if (in.ok) {
    s.active = over ? Site::secondary : Site::primary;
    // Windows count from the switch, never from before it.
    s.primary_good_since.reset();
    s.recovered_since.reset();
    s.rounds_below = 0;
    s.secondary_rounds_below = 0;
    s.last_transition = in.now;
    if (!held)
      enter(d, over ? State::secondary_active : State::primary_degraded, in.now, s.plan_initiator);
    d.reason = std::string(over ? "failed over to secondary" : "failed back to primary") +
               ": plan " + std::to_string(in.plan_id) + " " + in.detail +
               (held ? " (group stays held)" : "");
    return d;
  }
  // A failed plan leaves the world in a state no policy can reason about: ask a human.
  s.held_reason = std::string(over ? "failover" : "failback") + " plan " +
                  std::to_string(in.plan_id) + " failed: " + in.detail + "; still serving " +
                  std::string(to_string(s.active));
  if (!held) enter(d, State::held, in.now, Initiator::automatic);
  d.reason = "holding for a human: " + s.held_reason;
  d.alert = true;
  return d;
}

Decision drift_found(const GroupState& state, const DriftInput& in, const Policy& policy) {
  Decision d;
  d.next = state;
  GroupState& s = d.next;
  if (s.state == State::held) {
    d.reason = "drift left alone while held (" + in.detail + ")";
    d.accepted = false;
    return d;
  }
  if (s.plan_phase) {
    d.reason =
        "drift not repaired while plan " + std::to_string(s.plan_id) + " runs (" + in.detail + ")";
    d.accepted = false;
    return d;
  }
  while (!s.flap_times.empty() && in.now - s.flap_times.front() >= policy.flap_window)
    s.flap_times.pop_front();
  if (static_cast<int>(s.flap_times.size()) + 1 > policy.flap_limit) {
    s.held_reason = "flap guard: drift repair would be automatic change " +
                    std::to_string(s.flap_times.size() + 1) + " within " +
                    format_duration(policy.flap_window) + " (flap_limit " +
                    std::to_string(policy.flap_limit) + "); drift: " + in.detail;
    enter(d, State::held, in.now, Initiator::automatic);
    d.reason = "holding for a human: " + s.held_reason;
    d.alert = true;
    return d;
  }
  s.flap_times.push_back(in.now);
  ActionRequest a;
  a.phase = s.active == Site::secondary ? Phase::failover : Phase::failback;
  a.plan_id = s.next_plan_id++;
  a.initiator = Initiator::automatic;
  a.to = s.active;
  a.from = s.active == Site::secondary ? Site::primary : Site::secondary;
  a.term = s.term;
  a.repair = true;
  d.actions.push_back(a);
  d.reason = "repairing drift with the " + std::string(to_string(a.phase)) + " steps (plan " +
             std::to_string(a.plan_id) + "): " + in.detail;
  d.alert = true;
  return d;
}

}  // namespace fo::core
