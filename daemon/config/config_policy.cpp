// Config loader: [group.policy] -> core::Policy, with the dependent defaults resolved
// (failback_above, degraded_interval, stale_after, min_locations) and the cross-checks that
// keep the thresholds ordered.
#include "daemon/config/config_parts.hpp"

namespace fo::config::detail {
namespace {

// The longest duration parse_duration accepts; policy durations have no tighter natural bound.
constexpr core::Millis kMaxDuration{std::int64_t(366) * 24 * 3600 * 1000};

// A value that was written but is invalid is already reported; later checks that depend on it
// are skipped. Absent values take their default and stay checkable.
template <typename T>
bool usable(const TableReader& r, std::string_view key, const std::optional<T>& parsed) {
  return parsed.has_value() || !r.has(key);
}

}  // namespace

core::Policy parse_policy(const TableReader& group, std::optional<core::Millis> interval,
                          std::size_t group_locations) {
  core::Policy p;
  p.interval = interval.value_or(p.interval);
  p.degraded_interval = p.interval;
  p.stale_after = 2 * p.interval;
  p.min_locations = static_cast<int>(group_locations / 2 + 1);

  static const toml::table kEmpty;
  const toml::table* table = group.subtable("policy");
  TableReader r(
      group.sink(), table ? *table : kEmpty, "in [group.policy]", "policy.",
      {"warm_below", "cool_after", "failover_below", "failover_after", "secondary_min", "failback",
       "failback_above", "failback_stable", "min_dwell", "flap_limit", "flap_window",
       "degraded_interval", "stale_after", "min_locations", "require", "reconcile_interval"});
  if (!table) {
    p.failback_above = p.warm_below;
    return p;
  }
  r.reject_unknown_keys();

  auto warm_below = r.number("warm_below", 0.0, 1.0);
  if (warm_below) p.warm_below = *warm_below;
  if (auto v = r.duration("cool_after", core::Millis(0), kMaxDuration)) p.cool_after = *v;
  auto failover_below = r.number("failover_below", 0.0, 1.0);
  if (failover_below) p.failover_below = *failover_below;
  if (auto v = r.integer("failover_after", 1, 1000)) p.failover_after = static_cast<int>(*v);
  if (auto v = r.number("secondary_min", 0.0, 1.0, /*lo_open=*/true)) p.secondary_min = *v;
  if (auto v = r.choice("failback", {"auto", "manual"}))
    p.failback = *v == "auto" ? core::FailbackMode::automatic : core::FailbackMode::manual;
  auto failback_above = r.number("failback_above", 0.0, 1.0);
  p.failback_above = failback_above.value_or(p.warm_below);
  if (auto v = r.duration("failback_stable", core::Millis(0), kMaxDuration)) p.failback_stable = *v;
  if (auto v = r.duration("min_dwell", core::Millis(0), kMaxDuration)) p.min_dwell = *v;
  if (auto v = r.integer("flap_limit", 1, 100)) p.flap_limit = static_cast<int>(*v);
  if (auto v = r.duration("flap_window", core::Millis(1), kMaxDuration)) p.flap_window = *v;
  if (auto v = r.choice("require", {"all", "any"}))
    p.require = *v == "all" ? core::Require::all : core::Require::any;

  bool thresholds_ok =
      usable(r, "warm_below", warm_below) && usable(r, "failover_below", failover_below);
  if (thresholds_ok && !(p.failover_below < p.warm_below)) {
    std::string_view at = r.has("failover_below") ? "failover_below" : "warm_below";
    r.error_at_key(at, "policy.failover_below (" + format_number(p.failover_below) +
                           ") must be below warm_below (" + format_number(p.warm_below) + ")");
    thresholds_ok = false;
  }
  if (thresholds_ok && failback_above && !(*failback_above > p.failover_below)) {
    r.error_at_key("failback_above", "policy.failback_above (" + format_number(*failback_above) +
                                         ") must be above failover_below (" +
                                         format_number(p.failover_below) + ")");
  }

  if (auto v = r.duration("reconcile_interval", core::Millis(0), std::chrono::hours(24)))
    p.reconcile_interval = *v;
  if (auto v = r.duration("degraded_interval", core::Millis(100), kMaxDuration)) {
    if (interval && *v > *interval)
      r.error_at_key("degraded_interval", "policy.degraded_interval (" + format_exact(*v) +
                                              ") must not exceed the group interval (" +
                                              format_exact(*interval) + ")");
    else
      p.degraded_interval = *v;
  }
  if (auto v = r.duration("stale_after", core::Millis(100), kMaxDuration)) {
    if (interval && *v < *interval)
      r.error_at_key("stale_after", "policy.stale_after (" + format_exact(*v) +
                                        ") must be at least the group interval (" +
                                        format_exact(*interval) + ")");
    else
      p.stale_after = *v;
  }
  if (auto v = r.integer("min_locations", 1, static_cast<std::int64_t>(kMaxLocations))) {
    if (group_locations > 0 && *v > static_cast<std::int64_t>(group_locations))
      r.error_at_value("min_locations", "policy.min_locations: " + std::to_string(*v) +
                                            " is more than the group's " +
                                            std::to_string(group_locations) + " location(s)");
    else
      p.min_locations = static_cast<int>(*v);
  }
  return p;
}

}  // namespace fo::config::detail
