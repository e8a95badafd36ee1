// Per-group runtime of the daemon: engine state, health board, round bookkeeping, plan queue.
// Internal to daemon/.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "actions/executor.hpp"
#include "daemon/config/config.hpp"
#include "daemon/core/engine.hpp"
#include "daemon/core/health.hpp"
#include "daemon/daemon.hpp"
#include "daemon/platform/event.hpp"
#include "probes/probe.hpp"

namespace fo {

struct Daemon::PlanRun {
  core::ActionRequest request;
  std::unique_ptr<actions::PlanRunner> runner;
};

struct Daemon::Group {
  Group(const config::Group& c)
      : cfg(c), board(c.locations, probe_names(c.primary), probe_names(c.secondary)) {}

  static std::vector<std::string> probe_names(const config::Site& s) {
    std::vector<std::string> out;
    for (const auto& p : s.probes) out.push_back(p.name);
    return out;
  }

  config::Group cfg;
  core::HealthBoard board;
  core::GroupState state;
  std::string saved_blob;
  core::SiteHealth primary, secondary;  // as of the last round
  bool have_round = false;
  std::string reason;  // last reason sentence
  uint64_t rounds = 0;

  // Latest result detail per (site, location, probe), for status.
  std::map<std::tuple<int, std::string, std::string>, probes::ProbeResult> last_results;

  std::unique_ptr<platform::Timer> round_timer;
  int in_flight = 0;
  uint64_t round_generation = 0;
  core::Millis round_started_mono{0};
  core::Instant round_started_wall{};
  bool round_pending = false;  // the timer fired while the previous round was still out
  // Rounds (daemon_round.cpp): the open round ends at its deadline at the latest.
  using ProbeKey = std::tuple<int, std::string, std::string>;  // (site, location, probe)
  bool round_open = false;
  std::unique_ptr<platform::Timer> deadline_timer;
  std::set<ProbeKey> probing;   // checks still running, whichever round started them
  uint64_t skipped_checks = 0;  // not started: the previous check of it was still running
  uint64_t late_results = 0;    // arrived after their round's deadline (ignored)

  std::deque<core::ActionRequest> plans;
  std::unique_ptr<PlanRun> running;
  std::unique_ptr<PlanRun> retired;            // finished; freed on the next loop iteration
  std::unique_ptr<platform::Defer> plan_kick;  // runs the next plan outside plan callbacks

  // Reconciliation: observes the effect of the active site's plan every reconcile_interval.
  std::unique_ptr<platform::Timer> reconcile_timer;
  std::unique_ptr<actions::PlanRunner> observer;
  std::unique_ptr<actions::PlanRunner> observer_retired;  // freed on the next loop iteration
  std::string last_drift;                                 // "" when the last observation found none
  // The steps that drifted, for the repair plan decided from that observation: a repair runs
  // only them (an exec step that rewinds a database must not run again because a DNS record
  // drifted).
  uint64_t repair_plan_id = 0;
  std::set<std::size_t> repair_steps;
  // The drifting steps of the observation in progress, recorded when it ends: under the id of
  // the repair plan it leads to, so the history shows drift and repair together.
  std::vector<actions::StepEvent> drift_events;
};

}  // namespace fo
