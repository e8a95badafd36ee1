// Names and durations of the core vocabulary.
#include <catch2/catch.hpp>

#include "daemon/core/types.hpp"

using namespace fo::core;
using namespace std::chrono_literals;

TEST_CASE("state names are the public contract") {
  CHECK(to_string(State::primary_active) == "primary_active");
  CHECK(to_string(State::primary_degraded) == "primary_degraded");
  CHECK(to_string(State::failing_over) == "failing_over");
  CHECK(to_string(State::secondary_active) == "secondary_active");
  CHECK(to_string(State::failing_back) == "failing_back");
  CHECK(to_string(State::held) == "held");
  for (auto s : {State::primary_active, State::primary_degraded, State::failing_over,
                 State::secondary_active, State::failing_back, State::held})
    CHECK(state_from_string(to_string(s)) == s);
  CHECK_FALSE(state_from_string("Primary_Active"));
  CHECK(to_string(Initiator::automatic) == "auto");
  CHECK(to_string(Initiator::operator_) == "operator");
  CHECK(phase_from_string("cool") == Phase::cool);
  CHECK(site_from_string("secondary") == Site::secondary);
}

TEST_CASE("durations parse with units and reject junk") {
  CHECK(parse_duration("250ms") == Millis(250));
  CHECK(parse_duration("10s") == Millis(10000));
  CHECK(parse_duration("45m") == Millis(45 * 60000));
  CHECK(parse_duration("1h") == Millis(3600000));
  CHECK(parse_duration("1h30m") == Millis(5400000));
  CHECK(parse_duration("2d") == Millis(2 * 86400000));
  CHECK(parse_duration("0s") == Millis(0));
  for (auto bad :
       {"", "10", "s", "10x", "-5s", "1.5s", "10 s", "367d", "99999999999999999999s", "1h-"})
    CHECK_FALSE(parse_duration(bad));
}

TEST_CASE("durations format readably") {
  CHECK(format_duration(0ms) == "0s");
  CHECK(format_duration(250ms) == "250ms");
  CHECK(format_duration(90s) == "1m30s");
  CHECK(format_duration(45min) == "45m");
  CHECK(format_duration(3h + 5s) == "3h5s");
  CHECK(format_duration(-2s) == "-2s");
  CHECK(format_duration(2080ms) == "2s");
}
