// Probe rounds of the daemon: one round per group and interval, scheduled with jitter, ended by
// its deadline (80% of the interval) or when every check has answered. Local locations run each
// probe through the ProbeDispatcher; an agent location gets one request with all the group's
// probes (probes/agent_client.hpp). A check still running from an earlier round is not started
// again, so a slow target is never probed faster than a healthy one. Late and missing results
// are never failures: the health board simply has nothing new from that location.
#include <spdlog/spdlog.h>

#include "daemon/daemon.hpp"
#include "daemon/daemon_group.hpp"
#include "daemon/daemon_round.hpp"

namespace fo {

using core::Millis;
using core::Site;

namespace {

std::string locations_text(const core::SiteHealth& h) {
  std::string out;
  for (const auto& l : h.locations) {
    if (!out.empty()) out += ",";
    out += l.location + "=" +
           (l.verdict == core::Verdict::healthy     ? "h"
            : l.verdict == core::Verdict::unhealthy ? "u"
                                                    : "m");
  }
  return out;
}

bool same_agent(const config::Location& a, const config::Location& b) {
  return a.agent.url == b.agent.url && a.agent.token_file == b.agent.token_file &&
         a.agent.ca_file == b.agent.ca_file && a.agent.tls_verify == b.agent.tls_verify &&
         a.agent.timeout == b.agent.timeout;
}

}  // namespace

void Daemon::schedule_round(Group& g, Millis delay) {
  // The first round starts at once; later ones are spread.
  const Millis spread = delay.count() > 0
                            ? round_jitter(core::round_interval(g.state, g.cfg.policy), round_rng_)
                            : Millis(0);
  g.round_timer->arm_in(std::max(Millis(0), delay + spread));
}

probes::AgentClient& Daemon::agent_for(const config::Location& loc) {
  auto& slot = agents_[loc.name];
  // A reload that changed the agent's address or credentials starts afresh (and forgets the
  // backoff); requests of the old client are abandoned and count as missing.
  if (!slot || !same_agent(slot->location(), loc))
    slot = std::make_unique<probes::AgentClient>(*curl_, loc);
  return *slot;
}

void Daemon::start_round(Group& g) {
  if (stopping_) return;
  if (g.round_open) {  // never two rounds of the same group at once
    g.round_pending = true;
    return;
  }
  probes_->set_max_concurrent(config_.daemon.max_concurrent_probes);
  if (!g.deadline_timer) {
    Group* raw = &g;
    g.deadline_timer = std::make_unique<platform::Timer>(event_.get(), [this, raw] {
      if (!raw->round_open) return;
      spdlog::debug("group {}: round deadline: {} check(s) still out count as missing",
                    raw->cfg.name, raw->in_flight);
      finish_round(*raw);
    });
  }
  g.round_pending = false;
  g.round_open = true;
  g.in_flight = 0;
  g.round_started_mono = platform::mono_now(event_.get());
  g.round_started_wall = now();
  const uint64_t gen = g.round_generation = ++generation_;
  const Millis deadline = round_deadline(core::round_interval(g.state, g.cfg.policy));
  g.deadline_timer->arm_in(deadline);
  const std::string name = g.cfg.name;
  for (const auto& loc_name : g.cfg.locations) {
    const config::Location* loc = config_.find_location(loc_name);
    if (!loc) continue;
    std::vector<probes::agent::WireProbe> asked;
    std::vector<Group::ProbeKey> keys;
    for (Site site : {Site::primary, Site::secondary}) {
      const config::Site& s = site == Site::primary ? g.cfg.primary : g.cfg.secondary;
      for (const auto& probe : s.probes) {
        Group::ProbeKey key{int(site), loc_name, probe.name};
        if (!g.probing.insert(key).second) {
          ++g.skipped_checks;  // still out from an earlier round: one check per target
          continue;
        }
        if (loc->kind == config::LocationKind::agent) {
          asked.push_back({site, probe});
          keys.push_back(std::move(key));
          continue;
        }
        ++g.in_flight;
        probes_->start(
            probe, *loc,
            [this, name, gen, site, key, probe_name = probe.name](probes::ProbeResult r) {
              auto it = groups_.find(name);
              if (it == groups_.end()) return;
              Group& grp = *it->second;
              grp.probing.erase(key);
              record_result(grp, gen, site, std::get<1>(key), probe_name, std::move(r));
              end_check(grp, gen);
            });
      }
    }
    if (asked.empty()) continue;
    ++g.in_flight;
    agent_for(*loc).query(
        name, gen, deadline, asked,
        [this, name, gen, loc_name, keys = std::move(keys)](probes::AgentOutcome o) {
          auto it = groups_.find(name);
          if (it == groups_.end()) return;
          Group& grp = *it->second;
          for (const auto& key : keys) grp.probing.erase(key);
          if (!o.ok)
            spdlog::debug("group {}: no results from location {}: {}", name, loc_name, o.error);
          for (auto& r : o.results)
            record_result(grp, gen, r.site, loc_name, r.probe, std::move(r.result));
          end_check(grp, gen);
        });
  }
  if (g.in_flight == 0) finish_round(g);
}

void Daemon::end_check(Group& g, uint64_t gen) {
  if (gen != g.round_generation || !g.round_open) return;
  if (--g.in_flight == 0) finish_round(g);
}

void Daemon::record_result(Group& g, uint64_t gen, Site site, const std::string& location,
                           const std::string& probe, probes::ProbeResult r) {
  if (gen != g.round_generation || !g.round_open) {
    ++g.late_results;
    spdlog::debug("group {}: {} probe {} from {} answered after the round's deadline; ignored",
                  g.cfg.name, core::to_string(site), probe, location);
    return;
  }
  if (r.missing) {
    spdlog::debug("group {}: {} probe {} from {}: {}", g.cfg.name, core::to_string(site), probe,
                  location, r.error);
    return;
  }
  g.board.record({now(), site, location, probe, r.ok});
  if (!r.ok)
    spdlog::debug("group {}: {} probe {} from {} failed: {}", g.cfg.name, core::to_string(site),
                  probe, location, r.error);
  g.last_results[{int(site), location, probe}] = std::move(r);
}

void Daemon::finish_round(Group& g) {
  g.round_open = false;
  g.in_flight = 0;
  if (g.deadline_timer) g.deadline_timer->disarm();
  const core::Instant t = now();
  const auto& policy = g.cfg.policy;
  core::RoundInput in{t, g.board.health(Site::primary, t, policy),
                      g.board.health(Site::secondary, t, policy)};
  core::Decision d = core::decide(g.state, in, policy);
  g.primary = in.primary;
  g.secondary = in.secondary;
  g.have_round = true;
  ++g.rounds;
  metrics_->count_round(g.cfg.name);
  metrics_->set_site_health(g.cfg.name, Site::primary, in.primary);
  metrics_->set_site_health(g.cfg.name, Site::secondary, in.secondary);
  apply(g, d, std::nullopt);
  store_->record_round({core::to_ms(t), g.cfg.name, std::string(core::to_string(g.state.state)),
                        in.primary.healthy, in.primary.reporting, in.primary.configured,
                        in.primary.known, in.secondary.healthy, in.secondary.reporting,
                        in.secondary.configured, in.secondary.known, locations_text(in.primary),
                        locations_text(in.secondary)});
  update_status();
  // The next round is due one interval after this one started, whatever the probes took.
  const Millis elapsed = platform::mono_now(event_.get()) - g.round_started_mono;
  schedule_round(g, core::round_interval(g.state, policy) - elapsed);
  if (g.round_pending) start_round(g);
}

}  // namespace fo
