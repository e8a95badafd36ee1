// GroupState survives the store as text, and garbage is rejected rather than guessed.
#include <catch2/catch.hpp>

#include "daemon/core/engine.hpp"

using namespace fo::core;

TEST_CASE("group state round-trips through its text form") {
  GroupState s;
  s.state = State::failing_over;
  s.active = Site::primary;
  s.secondary_warm = true;
  s.since = Instant(Millis(1700000000123));
  s.last_transition = Instant(Millis(1700000000000));
  s.flap_times = {Instant(Millis(1)), Instant(Millis(2))};
  s.rounds_below = 3;
  s.secondary_rounds_below = 1;
  s.primary_below_warm = true;
  s.recovered_since = Instant(Millis(99));
  s.plan_phase = Phase::failover;
  s.plan_id = 12;
  s.next_plan_id = 13;
  s.plan_initiator = Initiator::operator_;
  s.term = 4;
  s.held_reason = "multi\nline = 100%, yes";
  auto back = deserialize(serialize(s));
  REQUIRE(back);
  CHECK(serialize(*back) == serialize(s));
  CHECK(back->held_reason == s.held_reason);
  CHECK(back->plan_phase == Phase::failover);
  CHECK_FALSE(back->primary_good_since);
}

TEST_CASE("bad state text is rejected") {
  CHECK_FALSE(deserialize(""));
  CHECK_FALSE(deserialize("v=1\n"));
  CHECK_FALSE(deserialize("v=2\nstate=held\n"));
  CHECK_FALSE(deserialize("v=1\nstate=bogus\n"));
  CHECK_FALSE(deserialize("v=1\nstate=held\nsince=abc\n"));
  CHECK_FALSE(deserialize("v=1\nstate=held\nheld_reason=%4\n"));
  CHECK_FALSE(deserialize("v=1\nstate=held\nnonsense\n"));
  CHECK(deserialize("v=1\nstate=held\nfuture_key=1\n"));
}
