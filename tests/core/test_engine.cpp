// Decision tables for the engine: (state, observations, time) -> (state, actions, reason).
#include <catch2/catch.hpp>

#include "daemon/core/engine.hpp"

using namespace fo::core;
using namespace std::chrono_literals;

namespace {

Instant T(int64_t s) {
  return Instant(Millis(s * 1000));
}

SiteHealth H(int healthy, int reporting, int configured = 6, int min_locations = 4) {
  SiteHealth h;
  h.healthy = healthy;
  h.reporting = reporting;
  h.configured = configured;
  h.known = reporting > 0 && reporting >= min_locations;
  return h;
}

Policy policy() {
  Policy p;
  p.min_locations = 4;
  return p;
}

GroupState in_state(State s, Site active = Site::primary, bool warm = false) {
  GroupState g;
  g.state = s;
  g.active = active;
  g.secondary_warm = warm;
  return g;
}

// Every transition the engine makes must be in the transition table.
Decision checked(Decision d) {
  if (d.transition) {
    INFO(to_string(d.transition->from) << " -> " << to_string(d.transition->to));
    CHECK(transition_allowed(d.transition->from, d.transition->to));
  }
  CHECK_FALSE(d.reason.empty());
  return d;
}

Decision round(const GroupState& g, SiteHealth p, SiteHealth s, Instant now = T(1000),
               const Policy& pol = policy()) {
  return checked(decide(g, RoundInput{now, p, s}, pol));
}

}  // namespace

TEST_CASE("round decision table") {
  struct Row {
    const char* name;
    GroupState before;
    SiteHealth primary, secondary;
    State after;
    std::vector<Phase> actions;
    const char* reason_prefix;
  };
  GroupState three_below = in_state(State::primary_degraded, Site::primary, true);
  three_below.rounds_below = 2;
  std::vector<Row> rows = {
      {"healthy primary holds",
       in_state(State::primary_active),
       H(6, 6),
       H(0, 6),
       State::primary_active,
       {},
       "holding: primary 6/6 healthy"},
      {"first dip warms the secondary",
       in_state(State::primary_active),
       H(5, 6),
       H(0, 6),
       State::primary_degraded,
       {Phase::warm},
       "warming secondary: primary 5/6 below warm_below 100%"},
      {"already warm: degraded, no second warm",
       in_state(State::primary_degraded, Site::primary, true),
       H(4, 6),
       H(6, 6),
       State::primary_degraded,
       {},
       "degraded: primary 4/6"},
      {"third round below with a healthy secondary fails over",
       three_below,
       H(1, 6),
       H(6, 6),
       State::failing_over,
       {Phase::failover},
       "failing over: primary 1/6 for 3 rounds, secondary 6/6"},
      {"both sites down stays",
       three_below,
       H(0, 6),
       H(2, 6),
       State::primary_degraded,
       {},
       "both sites down: primary 0/6 for 3 rounds, secondary 2/6 below secondary_min 50%"},
      {"secondary unknown stays",
       three_below,
       H(0, 6),
       H(1, 2),
       State::primary_degraded,
       {},
       "both sites down"},
      {"primary unknown: no transition",
       three_below,
       H(0, 2),
       H(6, 6),
       State::primary_degraded,
       {},
       "primary health unknown (2/6 reporting): no automatic transition"},
      {"unknown does not warm",
       in_state(State::primary_active),
       H(0, 1),
       H(6, 6),
       State::primary_active,
       {},
       "primary health unknown"},
      {"held never moves", in_state(State::held), H(0, 6), H(6, 6), State::held, {}, "held ("},
      {"failing over waits for its plan",
       in_state(State::failing_over, Site::primary, true),
       H(0, 6),
       H(6, 6),
       State::failing_over,
       {},
       "failing over: plan 0 in progress"},
  };
  for (const auto& r : rows) {
    SECTION(r.name) {
      Decision d = round(r.before, r.primary, r.secondary);
      CHECK(d.next.state == r.after);
      std::vector<Phase> phases;
      for (const auto& a : d.actions) phases.push_back(a.phase);
      CHECK(phases == r.actions);
      INFO(d.reason);
      CHECK(d.reason.rfind(r.reason_prefix, 0) == 0);
    }
  }
}

TEST_CASE("failover needs failover_after consecutive known rounds") {
  GroupState g = in_state(State::primary_degraded, Site::primary, true);
  g = round(g, H(1, 6), H(6, 6), T(10)).next;
  CHECK(g.rounds_below == 1);
  g = round(g, H(1, 6), H(6, 6), T(20)).next;
  CHECK(g.rounds_below == 2);
  // An unknown round resets the run: missing data is neither up nor down.
  g = round(g, H(0, 1), H(6, 6), T(30)).next;
  CHECK(g.rounds_below == 0);
  g = round(g, H(1, 6), H(6, 6), T(40)).next;
  g = round(g, H(3, 6), H(6, 6), T(50)).next;  // 3/6 = 50% is not below 50%
  CHECK(g.rounds_below == 0);
  CHECK(g.state == State::primary_degraded);
}

TEST_CASE("failover plan carries id, direction and term") {
  GroupState g = in_state(State::primary_degraded, Site::primary, true);
  g.rounds_below = 2;
  g.term = 7;
  g.next_plan_id = 41;
  Decision d = round(g, H(0, 6), H(6, 6), T(100));
  REQUIRE(d.actions.size() == 1);
  CHECK(d.actions[0].phase == Phase::failover);
  CHECK(d.actions[0].plan_id == 41);
  CHECK(d.actions[0].from == Site::primary);
  CHECK(d.actions[0].to == Site::secondary);
  CHECK(d.actions[0].term == 7);
  CHECK(d.next.plan_phase == Phase::failover);
  CHECK(d.next.next_plan_id == 42);
  CHECK(d.transition->initiator == Initiator::automatic);
}

TEST_CASE("cool after the primary is back for cool_after") {
  Policy p = policy();
  GroupState g = in_state(State::primary_degraded, Site::primary, true);
  g = round(g, H(6, 6), H(6, 6), T(0), p).next;
  CHECK(g.recovered_since == T(0));
  Decision d = round(g, H(6, 6), H(6, 6), T(29 * 60), p);
  CHECK(d.next.state == State::primary_degraded);
  CHECK(d.reason == "degraded, recovering: primary 6/6 for 29m of 30m, secondary warm");
  d = round(d.next, H(6, 6), H(6, 6), T(30 * 60), p);
  CHECK(d.next.state == State::primary_active);
  REQUIRE(d.actions.size() == 1);
  CHECK(d.actions[0].phase == Phase::cool);
  CHECK_FALSE(d.next.secondary_warm);
}

TEST_CASE("no cooling on a partial view: a missing location may be the one that saw the outage") {
  Policy p = policy();
  GroupState g = in_state(State::primary_degraded, Site::primary, true);
  // Location 6 saw the primary fail, then stopped reporting: the other 5 see it healthy.
  g = round(g, H(5, 6), H(6, 6), T(0), p).next;
  Decision d = round(g, H(5, 5), H(6, 6), T(60), p);
  CHECK_FALSE(d.next.recovered_since);
  CHECK(d.reason ==
        "degraded: primary 5/5, secondary 6/6 warm; 1 of 6 locations not reporting: not cooling "
        "on a partial view");
  d = round(d.next, H(5, 5), H(6, 6), T(60 + 31 * 60), p);
  CHECK(d.next.state == State::primary_degraded);
  CHECK(d.actions.empty());
  // Once every location sees it healthy, the window starts; cool_after later it cools.
  d = round(d.next, H(6, 6), H(6, 6), T(40 * 60), p);
  CHECK(d.next.recovered_since == T(40 * 60));
  d = round(d.next, H(6, 6), H(6, 6), T(70 * 60), p);
  CHECK(d.next.state == State::primary_active);
  REQUIRE(d.actions.size() == 1);
  CHECK(d.actions[0].phase == Phase::cool);
}

TEST_CASE("a location missing for a while pauses the cool window without restarting it") {
  Policy p = policy();
  GroupState g = in_state(State::primary_degraded, Site::primary, true);
  g = round(g, H(6, 6), H(6, 6), T(0), p).next;
  g = round(g, H(5, 5), H(6, 6), T(10 * 60), p).next;
  CHECK(g.recovered_since == T(0));
  // Due, but the view is partial: no cooling yet.
  Decision d = round(g, H(5, 5), H(6, 6), T(30 * 60), p);
  CHECK(d.next.state == State::primary_degraded);
  CHECK(d.reason ==
        "degraded, recovering: primary 5/5 for 30m of 30m, secondary warm; 1 of 6 locations not "
        "reporting: not cooling on a partial view");
  d = round(d.next, H(6, 6), H(6, 6), T(31 * 60), p);
  CHECK(d.next.state == State::primary_active);
}

TEST_CASE("a dip restarts the cool window") {
  GroupState g = in_state(State::primary_degraded, Site::primary, true);
  g = round(g, H(6, 6), H(6, 6), T(0)).next;
  g = round(g, H(5, 6), H(6, 6), T(20 * 60)).next;
  g = round(g, H(6, 6), H(6, 6), T(21 * 60)).next;
  Decision d = round(g, H(6, 6), H(6, 6), T(40 * 60));
  CHECK(d.next.state == State::primary_degraded);
}

TEST_CASE("failback only after failback_stable without a single dip") {
  Policy p = policy();
  GroupState g = in_state(State::secondary_active, Site::secondary, true);
  g.last_transition = T(0);
  g = round(g, H(6, 6), H(6, 6), T(60), p).next;
  Decision d = round(g, H(6, 6), H(6, 6), T(60 + 44 * 60), p);
  CHECK(d.next.state == State::secondary_active);
  CHECK(d.reason == "serving from secondary: primary 6/6 stable for 44m of 45m");
  // One dip restarts the window.
  g = round(d.next, H(5, 6), H(6, 6), T(60 + 44 * 60 + 10), p).next;
  CHECK_FALSE(g.primary_good_since);
  g = round(g, H(6, 6), H(6, 6), T(60 + 44 * 60 + 20), p).next;
  d = round(g, H(6, 6), H(6, 6), T(60 + 46 * 60), p);
  CHECK(d.next.state == State::secondary_active);
  d = round(d.next, H(6, 6), H(6, 6), T(60 + 44 * 60 + 20 + 45 * 60), p);
  CHECK(d.next.state == State::failing_back);
  REQUIRE(d.actions.size() == 1);
  CHECK(d.actions[0].phase == Phase::failback);
  CHECK(d.actions[0].from == Site::secondary);
  CHECK(d.actions[0].to == Site::primary);
  CHECK(d.reason == "failing back: primary 6/6 stable for 45m");
}

TEST_CASE("unknown primary health restarts the stable window") {
  GroupState g = in_state(State::secondary_active, Site::secondary, true);
  g = round(g, H(6, 6), H(6, 6), T(0)).next;
  g = round(g, H(2, 2), H(6, 6), T(30 * 60)).next;
  CHECK_FALSE(g.primary_good_since);
}

TEST_CASE("manual failback never fails back by itself") {
  Policy p = policy();
  p.failback = FailbackMode::manual;
  GroupState g = in_state(State::secondary_active, Site::secondary, true);
  for (int m = 0; m <= 600; m += 10) g = round(g, H(6, 6), H(6, 6), T(m * 60), p).next;
  CHECK(g.state == State::secondary_active);
}

TEST_CASE("min_dwell delays a switch back") {
  Policy p = policy();
  p.failback_stable = 1min;
  p.min_dwell = 10min;
  GroupState g = in_state(State::secondary_active, Site::secondary, true);
  g.last_transition = T(0);
  g = round(g, H(6, 6), H(6, 6), T(10), p).next;
  Decision d = round(g, H(6, 6), H(6, 6), T(5 * 60), p);
  CHECK(d.next.state == State::secondary_active);
  CHECK(d.reason.find("min_dwell 10m not reached (5m since the last switch)") != std::string::npos);
  d = round(d.next, H(6, 6), H(6, 6), T(10 * 60), p);
  CHECK(d.next.state == State::failing_back);
}

TEST_CASE("flap guard holds instead of exceeding flap_limit") {
  Policy p = policy();
  p.failback_stable = 1min;
  p.min_dwell = 0ms;
  GroupState g = in_state(State::secondary_active, Site::secondary, true);
  g.flap_times = {T(0), T(600), T(1200)};
  g = round(g, H(6, 6), H(6, 6), T(1300), p).next;
  Decision d = round(g, H(6, 6), H(6, 6), T(1400), p);
  CHECK(d.next.state == State::held);
  CHECK(d.alert);
  CHECK(d.actions.empty());
  CHECK(d.reason ==
        "holding for a human: flap guard: failback would be automatic switch 4 within 1h "
        "(flap_limit 3)");
  // Once the oldest switch leaves the window, the same situation fails back.
  g.flap_times = {T(0), T(600), T(1200)};
  g = round(g, H(6, 6), H(6, 6), T(3600), p).next;
  d = round(g, H(6, 6), H(6, 6), T(3700), p);
  CHECK(d.next.state == State::failing_back);
}

TEST_CASE("a dead secondary with a healthy primary fails back early") {
  GroupState g = in_state(State::secondary_active, Site::secondary, true);
  g = round(g, H(6, 6), H(0, 6), T(10)).next;
  g = round(g, H(6, 6), H(0, 6), T(20)).next;
  Decision d = round(g, H(6, 6), H(0, 6), T(30));
  CHECK(d.next.state == State::failing_back);
  CHECK(d.reason.rfind("failing back early: serving secondary 0/6 for 3 rounds", 0) == 0);
}

TEST_CASE("plan results") {
  GroupState g = in_state(State::failing_over, Site::primary, true);
  g.plan_phase = Phase::failover;
  g.plan_id = 5;
  SECTION("success switches the active site") {
    Decision d =
        checked(plan_finished(g, {T(50), Phase::failover, 5, true, "all 2 steps ok"}, policy()));
    CHECK(d.next.state == State::secondary_active);
    CHECK(d.next.active == Site::secondary);
    CHECK_FALSE(d.next.plan_phase);
    CHECK(d.next.last_transition == T(50));
    CHECK(d.reason == "failed over to secondary: plan 5 all 2 steps ok");
  }
  SECTION("failure holds for a human and keeps the primary active") {
    Decision d =
        checked(plan_finished(g, {T(50), Phase::failover, 5, false, "step 1 exited 3"}, policy()));
    CHECK(d.next.state == State::held);
    CHECK(d.next.active == Site::primary);
    CHECK(d.alert);
    CHECK(d.next.held_reason == "failover plan 5 failed: step 1 exited 3; still serving primary");
  }
  SECTION("a stale result is ignored") {
    Decision d = plan_finished(g, {T(50), Phase::failover, 4, true, ""}, policy());
    CHECK_FALSE(d.accepted);
    CHECK(d.next.state == State::failing_over);
  }
  SECTION("failback success returns to primary with the secondary still warm") {
    GroupState b = in_state(State::failing_back, Site::secondary, true);
    b.plan_phase = Phase::failback;
    b.plan_id = 9;
    Decision d = checked(plan_finished(b, {T(50), Phase::failback, 9, true, "ok"}, policy()));
    CHECK(d.next.state == State::primary_degraded);
    CHECK(d.next.active == Site::primary);
    CHECK(d.next.secondary_warm);
  }
}

TEST_CASE("operator commands") {
  CommandInput c{T(100), Command::hold, false, H(6, 6), H(6, 6), "uid=0", "maintenance"};
  GroupState g = in_state(State::primary_active);
  SECTION("hold then release") {
    Decision d = checked(apply_command(g, c, policy()));
    CHECK(d.next.state == State::held);
    CHECK(d.transition->initiator == Initiator::operator_);
    CHECK(d.reason == "held by operator uid=0: maintenance; automatic transitions stopped");
    CHECK_FALSE(apply_command(d.next, c, policy()).accepted);
    c.command = Command::release;
    Decision r = checked(apply_command(d.next, c, policy()));
    CHECK(r.next.state == State::primary_active);
    CHECK(r.next.held_reason.empty());
    CHECK_FALSE(apply_command(r.next, c, policy()).accepted);
  }
  SECTION("release after a failover while held returns to secondary_active") {
    GroupState h = in_state(State::held, Site::secondary, true);
    c.command = Command::release;
    CHECK(apply_command(h, c, policy()).next.state == State::secondary_active);
    h.active = Site::primary;
    CHECK(apply_command(h, c, policy()).next.state == State::primary_degraded);
  }
  SECTION("failover needs a healthy secondary unless forced") {
    c.command = Command::failover;
    c.secondary = H(1, 6);
    Decision d = apply_command(g, c, policy());
    CHECK_FALSE(d.accepted);
    CHECK(d.reason ==
          "secondary 1/6 is not healthy (secondary_min 50%); use --force to fail over anyway");
    c.force = true;
    d = checked(apply_command(g, c, policy()));
    CHECK(d.accepted);
    CHECK(d.next.state == State::failing_over);
    REQUIRE(d.actions.size() == 2);
    CHECK(d.actions[0].phase == Phase::warm);
    CHECK(d.actions[1].phase == Phase::failover);
    CHECK(d.actions[1].initiator == Initiator::operator_);
    CHECK(d.next.flap_times.empty());  // operator switches do not count against the guard
    // Never two plans at once.
    Decision again = apply_command(d.next, c, policy());
    CHECK_FALSE(again.accepted);
    CHECK(again.reason == "plan 2 (failover) is in progress");
  }
  SECTION("operator failover while held keeps the hold") {
    GroupState h = in_state(State::held, Site::primary, true);
    c.command = Command::failover;
    Decision d = apply_command(h, c, policy());
    CHECK(d.accepted);
    CHECK(d.next.state == State::held);
    CHECK(d.next.plan_phase == Phase::failover);
    Decision done =
        plan_finished(d.next, {T(200), Phase::failover, d.next.plan_id, true, "ok"}, policy());
    CHECK(done.next.state == State::held);
    CHECK(done.next.active == Site::secondary);
  }
  SECTION("failback refuses when already on primary") {
    c.command = Command::failback;
    CHECK_FALSE(apply_command(g, c, policy()).accepted);
    GroupState s = in_state(State::secondary_active, Site::secondary, true);
    Decision d = checked(apply_command(s, c, policy()));
    CHECK(d.next.state == State::failing_back);
  }
}

TEST_CASE("transition table is consistent") {
  CHECK(transition_allowed(State::primary_active, State::primary_degraded));
  CHECK_FALSE(transition_allowed(State::primary_active, State::secondary_active));
  CHECK_FALSE(transition_allowed(State::failing_over, State::primary_active));
  CHECK_FALSE(transition_allowed(State::held, State::held));
  CHECK(transition_allowed(State::failing_back, State::primary_degraded));
}

TEST_CASE("rounds run at degraded_interval while the primary is below warm_below") {
  Policy p = policy();
  p.interval = 10s;
  p.degraded_interval = 2s;
  GroupState g = in_state(State::primary_active);
  CHECK(round_interval(g, p) == 10s);
  g = round(g, H(5, 6), H(6, 6), T(10), p).next;
  CHECK(round_interval(g, p) == 2s);
  g = round(g, H(6, 6), H(6, 6), T(12), p).next;
  CHECK(round_interval(g, p) == 10s);
}

TEST_CASE("resume re-issues the plan in flight, nothing else") {
  GroupState g = in_state(State::failing_over, Site::primary, true);
  CHECK(resume_actions(in_state(State::primary_degraded)).empty());
  g.plan_phase = Phase::failover;
  g.plan_id = 3;
  auto a = resume_actions(g);
  REQUIRE(a.size() == 1);
  CHECK(a[0].resume);
  CHECK(a[0].plan_id == 3);
}
