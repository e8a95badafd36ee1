// failoverd's metric families: names, help texts, labels and buckets (docs/metrics.md).
#include "daemon/metrics/daemon_metrics.hpp"

#include <cmath>
#include <limits>

namespace fo::metrics {
namespace {

constexpr core::State kAllStates[] = {
    core::State::primary_active,   core::State::primary_degraded, core::State::failing_over,
    core::State::secondary_active, core::State::failing_back,     core::State::held,
};
constexpr core::Site kAllSites[] = {core::Site::primary, core::Site::secondary};
constexpr core::Verdict kAllVerdicts[] = {core::Verdict::healthy, core::Verdict::unhealthy,
                                          core::Verdict::missing};

}  // namespace

DaemonMetrics::DaemonMetrics(std::string_view version, core::Instant started,
                             std::size_t max_series_per_family)
    : registry_(max_series_per_family),
      build_info_(registry_.gauge("failoverd_build_info",
                                  "Always 1; the version label names the running failoverd.",
                                  {"version"})),
      start_time_(registry_.gauge("failoverd_start_time_seconds",
                                  "Start time of the daemon since the Unix epoch, in seconds.",
                                  {})),
      group_state_(registry_.gauge(
          "failoverd_group_state",
          "1 for the group's current state, 0 for the other states of the state machine.",
          {"group", "state"})),
      active_site_(registry_.gauge("failoverd_group_active_site",
                                   "1 for the site that serves the group, 0 for the other site.",
                                   {"group", "site"})),
      health_ratio_(registry_.gauge("failoverd_site_health_ratio",
                                    "Share of reporting locations that see the site healthy "
                                    "(0..1); NaN while too few locations report.",
                                    {"group", "site"})),
      healthy_locations_(registry_.gauge("failoverd_site_healthy_locations",
                                         "Reporting locations that see the site healthy.",
                                         {"group", "site"})),
      reporting_locations_(registry_.gauge("failoverd_site_reporting_locations",
                                           "Locations with a fresh verdict about the site.",
                                           {"group", "site"})),
      location_verdict_(registry_.gauge(
          "failoverd_location_verdict",
          "1 for a location's current verdict about a site, 0 for the other verdicts.",
          {"group", "site", "location", "verdict"})),
      probe_duration_(registry_.histogram("failoverd_probe_duration_seconds",
                                          "Time one probe check took, failed checks included.",
                                          {"group", "site", "location", "probe"}, kProbeBuckets)),
      probe_results_(registry_.counter("failoverd_probe_results_total",
                                       "Probe checks by result (ok or fail).",
                                       {"group", "site", "location", "probe", "result"})),
      rounds_(registry_.counter("failoverd_rounds_total",
                                "Completed probe rounds (one decision each).", {"group"})),
      transitions_(registry_.counter("failoverd_transitions_total", "State transitions of a group.",
                                     {"group", "from", "to", "initiator"})),
      step_duration_(registry_.histogram(
          "failoverd_plan_step_duration_seconds",
          "Duration of finished plan step attempts, by final result of the attempt.",
          {"group", "phase", "step", "result"}, kStepBuckets)),
      plans_(registry_.counter("failoverd_plans_total", "Finished plans by result (ok or failed).",
                               {"group", "phase", "result"})),
      reconcile_drift_(registry_.counter(
          "failoverd_reconcile_drift_total",
          "Differences found between the intended and the observed state of a group.",
          {"group", "kind"})),
      store_queue_depth_(registry_.gauge("failoverd_store_queue_depth",
                                         "History records queued for the database.", {})),
      store_written_(registry_.counter("failoverd_store_records_written_total",
                                       "History records committed to the database.", {})),
      store_write_errors_(registry_.counter("failoverd_store_write_errors_total",
                                            "Failed database writes of history records.", {})),
      store_dropped_rounds_(
          registry_.counter("failoverd_store_dropped_rounds_total",
                            "Round records dropped because the store queue was full.", {})) {
  build_info_.set({version}, 1);
  start_time_.set({}, double(core::to_ms(started)) / 1000.0);
  set_store(0, 0, 0, 0);
}

void DaemonMetrics::set_group_state(std::string_view group, core::State state) {
  for (core::State s : kAllStates)
    group_state_.set({group, core::to_string(s)}, s == state ? 1 : 0);
}

void DaemonMetrics::set_active(std::string_view group, core::Site site) {
  for (core::Site s : kAllSites) active_site_.set({group, core::to_string(s)}, s == site ? 1 : 0);
}

void DaemonMetrics::set_site_health(std::string_view group, core::Site site, double ratio,
                                    int healthy, int reporting) {
  const std::string_view s = core::to_string(site);
  health_ratio_.set({group, s}, ratio);
  healthy_locations_.set({group, s}, healthy);
  reporting_locations_.set({group, s}, reporting);
}

void DaemonMetrics::set_site_health(std::string_view group, core::Site site,
                                    const core::SiteHealth& health) {
  set_site_health(group, site,
                  health.known ? health.ratio() : std::numeric_limits<double>::quiet_NaN(),
                  health.healthy, health.reporting);
  for (const auto& loc : health.locations)
    set_location_verdict(group, site, loc.location, loc.verdict);
}

void DaemonMetrics::set_location_verdict(std::string_view group, core::Site site,
                                         std::string_view location, core::Verdict verdict) {
  const std::string_view s = core::to_string(site);
  for (core::Verdict v : kAllVerdicts)
    location_verdict_.set({group, s, location, core::to_string(v)}, v == verdict ? 1 : 0);
}

void DaemonMetrics::observe_probe(std::string_view group, core::Site site,
                                  std::string_view location, std::string_view probe, bool ok,
                                  double latency_seconds) {
  const std::string_view s = core::to_string(site);
  probe_duration_.observe({group, s, location, probe}, latency_seconds);
  probe_results_.inc({group, s, location, probe, ok ? "ok" : "fail"});
}

void DaemonMetrics::count_transition(std::string_view group, core::State from, core::State to,
                                     core::Initiator initiator) {
  transitions_.inc({group, core::to_string(from), core::to_string(to), core::to_string(initiator)});
}

void DaemonMetrics::observe_step(std::string_view group, core::Phase phase, std::string_view step,
                                 std::string_view result, double seconds) {
  step_duration_.observe({group, core::to_string(phase), step, result}, seconds);
}

void DaemonMetrics::count_plan(std::string_view group, core::Phase phase, bool ok) {
  plans_.inc({group, core::to_string(phase), ok ? "ok" : "failed"});
}

void DaemonMetrics::count_round(std::string_view group) {
  rounds_.inc({group});
}

void DaemonMetrics::set_store(std::size_t queue_depth, uint64_t written, uint64_t write_errors,
                              uint64_t dropped_rounds) {
  store_queue_depth_.set({}, double(queue_depth));
  store_written_.set({}, double(written));
  store_write_errors_.set({}, double(write_errors));
  store_dropped_rounds_.set({}, double(dropped_rounds));
}

void DaemonMetrics::count_reconcile_drift(std::string_view group, std::string_view kind) {
  reconcile_drift_.inc({group, kind});
}

void DaemonMetrics::forget_group(std::string_view group) {
  for (Family* f : std::initializer_list<Family*>{
           &group_state_, &active_site_, &health_ratio_, &healthy_locations_, &reporting_locations_,
           &location_verdict_, &probe_duration_, &probe_results_, &rounds_, &transitions_,
           &step_duration_, &plans_, &reconcile_drift_})
    f->remove_matching("group", group);
}

}  // namespace fo::metrics
