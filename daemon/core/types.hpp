// Core vocabulary of failoverd: states, sites, phases, time and policy knobs.
// Pure: standard library only. The names returned by to_string() are a public contract
// (history, JSON, logs) and must never change.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fo::core {

using Millis = std::chrono::milliseconds;
// Engine time: milliseconds on the wall clock (persisted across restarts). Simulation starts at 0.
using Instant = std::chrono::time_point<std::chrono::system_clock, Millis>;

inline Instant instant_from_ms(int64_t ms) {
  return Instant(Millis(ms));
}
inline int64_t to_ms(Instant t) {
  return t.time_since_epoch().count();
}

enum class State {
  primary_active,    // primary serves, secondary cold
  primary_degraded,  // primary serves, secondary warm (started early)
  failing_over,      // failover plan running
  secondary_active,  // secondary serves
  failing_back,      // failback plan running
  held,              // automation stopped, a human decides
};

enum class Site { primary, secondary };

enum class Phase { warm, failover, failback, cool };

enum class Initiator { automatic, operator_ };

enum class FailbackMode { automatic, manual };

enum class Require { all, any };

std::string_view to_string(State s);
std::string_view to_string(Site s);
std::string_view to_string(Phase p);
std::string_view to_string(Initiator i);     // "auto" | "operator"
std::string_view to_string(FailbackMode m);  // "auto" | "manual"
std::string_view to_string(Require r);       // "all" | "any"
std::optional<State> state_from_string(std::string_view s);
std::optional<Site> site_from_string(std::string_view s);
std::optional<Phase> phase_from_string(std::string_view s);
std::optional<Initiator> initiator_from_string(std::string_view s);

// "250ms", "10s", "45m", "1h", "2d", also compound "1h30m". Returns nullopt on bad input,
// on a missing unit, and on values above 366 days.
std::optional<Millis> parse_duration(std::string_view text);
// Shortest readable form: 90000 ms -> "1m30s", 0 -> "0s", 250 -> "250ms".
std::string format_duration(Millis d);

// Policy of one group. Defaults are the documented ones (docs/config.md); the config loader
// resolves the dependent defaults (failback_above, degraded_interval, stale_after,
// min_locations) before the engine sees a Policy.
struct Policy {
  Millis interval{std::chrono::seconds(10)};
  Millis degraded_interval{std::chrono::seconds(10)};  // default: interval
  Millis stale_after{std::chrono::seconds(20)};        // default: 2 x interval
  int min_locations = 1;                               // default: majority of configured
  Require require = Require::all;

  double warm_below = 1.0;
  Millis cool_after{std::chrono::minutes(30)};
  double failover_below = 0.5;
  int failover_after = 3;
  double secondary_min = 0.5;
  FailbackMode failback = FailbackMode::automatic;
  double failback_above = 1.0;  // default: warm_below
  Millis failback_stable{std::chrono::minutes(45)};
  Millis min_dwell{std::chrono::minutes(10)};
  int flap_limit = 3;
  Millis flap_window{std::chrono::hours(1)};
  // How often the world is compared with the intended state (DNS, writable database); 0: never.
  Millis reconcile_interval{std::chrono::seconds(60)};
};

}  // namespace fo::core
