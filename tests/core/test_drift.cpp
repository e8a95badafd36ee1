// Reconciliation input of the engine: drift is repaired with the steps of the plan that made the
// active site serve, counted by the flap guard, and left alone while held or while a plan runs.
#include <catch2/catch.hpp>

#include "daemon/core/engine.hpp"

using namespace fo::core;
using namespace std::chrono_literals;

namespace {

Instant T(int64_t s) {
  return Instant(Millis(s * 1000));
}

GroupState in_state(State s, Site active) {
  GroupState g;
  g.state = s;
  g.active = active;
  g.next_plan_id = 5;
  g.term = 2;
  return g;
}

}  // namespace

TEST_CASE("drift: secondary serving is repaired with the failover steps", "[drift]") {
  Policy p;
  auto d = drift_found(in_state(State::secondary_active, Site::secondary),
                       {T(100), "dns#0: 127.0.0.1:53 answers 10.0.0.1"}, p);
  CHECK_FALSE(d.transition);
  REQUIRE(d.actions.size() == 1);
  const auto& a = d.actions[0];
  CHECK(a.phase == Phase::failover);
  CHECK(a.repair);
  CHECK(a.to == Site::secondary);
  CHECK(a.from == Site::primary);
  CHECK(a.plan_id == 5);
  CHECK(a.term == 2);
  CHECK(d.next.next_plan_id == 6);
  CHECK(d.next.state == State::secondary_active);
  CHECK_FALSE(d.next.plan_phase);  // a repair is not a switch: no plan in flight
  CHECK(d.next.flap_times.size() == 1);
  CHECK(d.alert);
  CHECK(d.reason ==
        "repairing drift with the failover steps (plan 5): dns#0: 127.0.0.1:53 answers 10.0.0.1");
}

TEST_CASE("drift: primary serving is repaired with the failback steps", "[drift]") {
  Policy p;
  for (State s : {State::primary_active, State::primary_degraded}) {
    auto d = drift_found(in_state(s, Site::primary), {T(100), "x"}, p);
    REQUIRE(d.actions.size() == 1);
    CHECK(d.actions[0].phase == Phase::failback);
    CHECK(d.actions[0].to == Site::primary);
    CHECK(d.next.state == s);
  }
}

TEST_CASE("drift: left alone while held or while a plan runs", "[drift]") {
  Policy p;
  auto held = drift_found(in_state(State::held, Site::secondary), {T(100), "x"}, p);
  CHECK(held.actions.empty());
  CHECK_FALSE(held.accepted);
  CHECK(held.reason == "drift left alone while held (x)");
  GroupState running = in_state(State::failing_over, Site::primary);
  running.plan_phase = Phase::failover;
  running.plan_id = 4;
  auto r = drift_found(running, {T(100), "x"}, p);
  CHECK(r.actions.empty());
  CHECK(r.reason == "drift not repaired while plan 4 runs (x)");
}

TEST_CASE("drift: repeated repairs trip the flap guard and hold the group", "[drift]") {
  Policy p;
  p.flap_limit = 2;
  p.flap_window = 1h;
  GroupState s = in_state(State::secondary_active, Site::secondary);
  auto d1 = drift_found(s, {T(0), "a"}, p);
  REQUIRE(d1.actions.size() == 1);
  auto d2 = drift_found(d1.next, {T(60), "b"}, p);
  REQUIRE(d2.actions.size() == 1);
  auto d3 = drift_found(d2.next, {T(120), "c"}, p);
  CHECK(d3.actions.empty());
  REQUIRE(d3.transition);
  CHECK(d3.transition->to == State::held);
  CHECK(transition_allowed(d3.transition->from, d3.transition->to));
  CHECK(d3.next.held_reason ==
        "flap guard: drift repair would be automatic change 3 within 1h (flap_limit 2); drift: c");
  // Outside the window the old repairs no longer count.
  auto later = drift_found(d2.next, {T(3700), "d"}, p);
  CHECK(later.actions.size() == 1);
}
