// The daemon's metrics, typed: one method per thing the daemon reports, so the wiring code
// never spells a metric or label name. Every family is documented in docs/metrics.md.
// Loop-thread only, like the rest of the daemon.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/core/health.hpp"
#include "daemon/core/types.hpp"
#include "daemon/metrics/registry.hpp"

namespace fo::metrics {

// Bucket bounds in seconds.
inline const std::vector<double> kProbeBuckets{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                               0.25,  0.5,    1,     2.5,  5,     10,   30};
inline const std::vector<double> kStepBuckets{0.01, 0.05, 0.1, 0.5, 1,   2.5, 5,
                                              10,   30,   60,  120, 300, 600, 1800};

class DaemonMetrics {
 public:
  // `version`: failoverd_build_info{version}; `started`: failoverd_start_time_seconds.
  DaemonMetrics(std::string_view version, core::Instant started,
                std::size_t max_series_per_family = kDefaultMaxSeries);
  DaemonMetrics(const DaemonMetrics&) = delete;
  DaemonMetrics& operator=(const DaemonMetrics&) = delete;

  // failoverd_group_state{group,state}: 1 for `state`, 0 for the five other states.
  void set_group_state(std::string_view group, core::State state);
  // failoverd_group_active_site{group,site}: 1 for the serving site, 0 for the other.
  void set_active(std::string_view group, core::Site site);
  // ratio: healthy/reporting, NaN when the health is unknown (too few locations reporting).
  void set_site_health(std::string_view group, core::Site site, double ratio, int healthy,
                       int reporting);
  // The same from a round's SiteHealth, plus the verdict of every location in it.
  void set_site_health(std::string_view group, core::Site site, const core::SiteHealth& health);
  // failoverd_location_verdict{group,site,location,verdict}: 1 for `verdict`, 0 for the others.
  void set_location_verdict(std::string_view group, core::Site site, std::string_view location,
                            core::Verdict verdict);
  void observe_probe(std::string_view group, core::Site site, std::string_view location,
                     std::string_view probe, bool ok, double latency_seconds);
  void count_transition(std::string_view group, core::State from, core::State to,
                        core::Initiator initiator);
  // result: the step's final result ("ok", "failed", "timeout", "skipped").
  void observe_step(std::string_view group, core::Phase phase, std::string_view step,
                    std::string_view result, double seconds);
  void count_plan(std::string_view group, core::Phase phase, bool ok);
  void count_round(std::string_view group);
  // Absolute values from the store's own counters (store::StoreStats); call before rendering.
  void set_store(std::size_t queue_depth, uint64_t written, uint64_t write_errors,
                 uint64_t dropped_rounds);
  void count_reconcile_drift(std::string_view group, std::string_view kind);
  // Drops every series of a group (a reload removed it), so it stops being exported.
  void forget_group(std::string_view group);

  std::string render() const { return registry_.render(); }
  Registry& registry() { return registry_; }
  const Registry& registry() const { return registry_; }

 private:
  Registry registry_;
  GaugeFamily& build_info_;
  GaugeFamily& start_time_;
  GaugeFamily& group_state_;
  GaugeFamily& active_site_;
  GaugeFamily& health_ratio_;
  GaugeFamily& healthy_locations_;
  GaugeFamily& reporting_locations_;
  GaugeFamily& location_verdict_;
  HistogramFamily& probe_duration_;
  CounterFamily& probe_results_;
  CounterFamily& rounds_;
  CounterFamily& transitions_;
  HistogramFamily& step_duration_;
  CounterFamily& plans_;
  CounterFamily& reconcile_drift_;
  GaugeFamily& store_queue_depth_;
  CounterFamily& store_written_;
  CounterFamily& store_write_errors_;
  CounterFamily& store_dropped_rounds_;
};

}  // namespace fo::metrics
