// `failoverctl probe` (see probe.hpp). The same plumbing as the daemon's rounds: one sd-event
// loop, the shared CurlMulti, ProbeDispatcher for local checks, one AgentClient request per
// (group, agent location); every result is printed, also the ones that never came.
#include "ctl/probe.hpp"

#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <ostream>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "actions/exec/exec_runner.hpp"
#include "ctl/render.hpp"
#include "daemon/daemon_round.hpp"
#include "daemon/platform/curl_multi.hpp"
#include "probes/agent_client.hpp"
#include "probes/dispatcher.hpp"

namespace fo::ctl {
namespace {

using nlohmann::json;

struct Line {
  std::string group, site, location, probe;
  std::optional<probes::ProbeResult> result;  // nullopt: no result (yet)
  std::string why_missing;
};

std::string latency_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", ms);
  return buf;
}

}  // namespace

int run_probe_round(const config::Config& cfg, const ProbeCommand& cmd, std::ostream& out,
                    std::ostream& err) {
  if (!cmd.group.empty() && !cfg.find_group(cmd.group)) {
    err << "failoverctl: no group named '" << cmd.group << "' in " << cfg.source << "\n";
    return 2;
  }
  // stdout carries only the results (JSON lines are a contract); the probe layers' own log
  // lines repeat what the results say, so only errors go to stderr.
  if (!spdlog::get("failoverctl-probe")) {
    auto logger = spdlog::stderr_color_st("failoverctl-probe");
    logger->set_level(spdlog::level::err);
    spdlog::set_default_logger(logger);
  }
  // Declared before the loop objects: pending callbacks (which point here) are dropped when
  // those go, before these do.
  std::vector<Line> lines;
  std::size_t outstanding = 0;
  platform::EventPtr loop = platform::make_event();
  platform::CurlMulti curl(loop.get());
  actions::ExecRunner exec(loop.get());
  probes::ProbeDispatcher dispatcher(loop.get(), curl, exec);
  dispatcher.set_max_concurrent(cfg.daemon.max_concurrent_probes);
  std::map<std::string, std::unique_ptr<probes::AgentClient>> agents;
  core::Millis limit{0};
  uint64_t round = 1;
  // Lines are created up front and never move afterwards: callbacks hold their indexes. A check
  // is one local probe, or one agent request for all the probes of a group.
  struct Check {
    const config::Group* group;
    const config::Location* location;
    std::vector<std::size_t> lines;
  };
  std::vector<Check> checks;
  for (const config::Group& g : cfg.groups) {
    if (!cmd.group.empty() && g.name != cmd.group) continue;
    const core::Millis deadline = round_deadline(g.policy.interval);
    limit = std::max(limit, deadline);
    for (const auto& loc_name : g.locations) {
      const config::Location* loc = cfg.find_location(loc_name);
      if (!loc) continue;
      Check pending{&g, loc, {}};
      for (core::Site site : {core::Site::primary, core::Site::secondary}) {
        for (const auto& p : (site == core::Site::primary ? g.primary : g.secondary).probes) {
          lines.push_back({g.name, std::string(core::to_string(site)), loc_name, p.name,
                           std::nullopt, "no answer within the round's deadline"});
          pending.lines.push_back(lines.size() - 1);
        }
      }
      if (loc->kind == config::LocationKind::agent) {
        checks.push_back(std::move(pending));
      } else {
        for (std::size_t i : pending.lines) checks.push_back({&g, loc, {i}});
      }
    }
  }
  for (const Check& p : checks) {
    const config::Group& g = *p.group;
    auto probe_of = [&](std::size_t i) -> const config::Probe& {
      const auto& site = lines[i].site == "primary" ? g.primary : g.secondary;
      for (const auto& probe : site.probes)
        if (probe.name == lines[i].probe) return probe;
      return site.probes.front();  // not reached: lines were built from these probes
    };
    ++outstanding;
    if (p.location->kind == config::LocationKind::local) {
      const std::size_t i = p.lines.front();
      dispatcher.start(probe_of(i), *p.location, [&, i](probes::ProbeResult r) {
        if (r.missing)
          lines[i].why_missing = r.error;
        else
          lines[i].result = std::move(r);
        --outstanding;
      });
      continue;
    }
    auto& client = agents[p.location->name];
    if (!client) client = std::make_unique<probes::AgentClient>(curl, *p.location);
    std::vector<probes::agent::WireProbe> asked;
    for (std::size_t i : p.lines)
      asked.push_back(
          {lines[i].site == "primary" ? core::Site::primary : core::Site::secondary, probe_of(i)});
    const std::vector<std::size_t> indexes = p.lines;
    client->query(g.name, round++, round_deadline(g.policy.interval), asked,
                  [&, indexes](probes::AgentOutcome o) {
                    for (std::size_t i : indexes) {
                      if (!o.ok) lines[i].why_missing = o.error;
                      for (auto& r : o.results)
                        if (std::string(core::to_string(r.site)) == lines[i].site &&
                            r.probe == lines[i].probe)
                          lines[i].result = r.result;
                    }
                    --outstanding;
                  });
  }
  // Every check is bounded by its deadline; the loop gets a little more for the last replies.
  const auto end = std::chrono::steady_clock::now() + limit + std::chrono::milliseconds(500);
  while (outstanding > 0 && std::chrono::steady_clock::now() < end)
    if (sd_event_run(loop.get(), 50 * 1000) < 0) break;

  int code = 0;
  std::vector<Row> rows;
  for (const Line& l : lines) {
    const bool ok = l.result && l.result->ok;
    if (!ok) code = 1;
    const std::string error = l.result ? l.result->error : "no result: " + l.why_missing;
    const double latency = l.result ? l.result->latency_ms : 0;
    if (cmd.json) {
      out << json{{"group", l.group},
                  {"site", l.site},
                  {"location", l.location},
                  {"probe", l.probe},
                  {"ok", ok},
                  {"latency_ms", std::round(latency * 1000) / 1000},
                  {"error", error}}
                 .dump(-1, ' ', false, json::error_handler_t::replace)
          << "\n";
    } else {
      rows.push_back({l.group, l.site, l.location, l.probe,
                      ok ? "ok" : (l.result ? "FAILED" : "MISSING"),
                      l.result ? latency_text(latency) : "-", error});
    }
  }
  if (!cmd.json) {
    if (rows.empty())
      out << "no probes configured\n";
    else
      out << render_table({"GROUP", "SITE", "LOCATION", "PROBE", "RESULT", "LATENCY", "ERROR"},
                          rows);
  }
  return code;
}

}  // namespace fo::ctl
