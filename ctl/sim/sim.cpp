// `failoverctl simulate`: a CSV timeline streamed row by row into the simulator, events printed
// as they happen, so memory stays flat however long the timeline is.
#include <algorithm>
#include <ostream>

#include "ctl/sim/groups.hpp"
#include "ctl/sim/output.hpp"
#include "ctl/sim/sim.hpp"

namespace fo::sim {

using detail::EventPrinter;
using detail::GroupLookup;

core::SimGroup sim_group(const config::Group& group) {
  core::SimGroup g;
  g.name = group.name;
  g.policy = group.policy;
  g.locations = group.locations;
  for (int phase = 0; phase < 4; ++phase)
    for (const auto& step : group.steps[phase]) g.step_names[phase].push_back(step.name);
  g.plan_duration = core::Millis(0);
  g.plans_fail = false;
  return g;
}

namespace detail {

core::Millis longest_interval(const config::Config& cfg) {
  core::Millis m(0);
  for (const auto& g : cfg.groups) m = std::max(m, g.policy.interval);
  return m;
}

std::vector<core::SimGroup> sim_groups(const config::Config& cfg) {
  std::vector<core::SimGroup> out;
  out.reserve(cfg.groups.size());
  for (const auto& g : cfg.groups) out.push_back(sim_group(g));
  return out;
}

std::vector<std::string> group_names(const config::Config& cfg) {
  std::vector<std::string> out;
  for (const auto& g : cfg.groups) out.push_back(g.name);
  return out;
}

void print_events(core::Simulator& sim, EventPrinter& printer) {
  if (sim.events().empty()) return;
  for (const auto& e : sim.take_events()) printer.event(e);
}

}  // namespace detail

int run_simulate(const config::Config& cfg, const std::string& timeline_path,
                 const SimOptions& options, std::ostream& out, std::ostream& err) {
  core::Simulator sim(detail::sim_groups(cfg), core::Instant{});
  sim.record_rounds = static_cast<bool>(options.observer);
  const std::vector<std::string> names = detail::group_names(cfg);
  EventPrinter printer(out, options, names, std::nullopt);
  GroupLookup lookup(cfg);
  core::Observation obs;  // reused: its location string keeps its buffer from row to row
  TimelineStats stats;
  try {
    stats = read_timeline(timeline_path, [&](const TimelineRow& r) -> std::string {
      const GroupLookup::Entry* g = lookup.find(r.group);
      if (!g)
        return "unknown group \"" + std::string(r.group) + "\" (groups in " +
               (cfg.source.empty() ? std::string("the config") : cfg.source) + ": " +
               detail::name_list(names) + ")";
      if (!g->has_location(r.location))
        return "location \"" + std::string(r.location) + "\" is not a location of group \"" +
               *g->name + "\" (" + detail::name_list(*g->locations) + ")";
      obs.at = r.at;
      obs.site = r.site;
      obs.location.assign(r.location);
      obs.ok = r.ok;
      sim.observe(*g->name, obs);
      detail::print_events(sim, printer);
      return {};
    });
  } catch (const TimelineError& e) {
    out.flush();
    err << e.what() << '\n';
    return 1;
  }
  if (stats.rows == 0) {
    err << timeline_path << ":" << stats.lines << ": no data rows after the header\n";
    return 1;
  }
  sim.run_until(stats.last + detail::longest_interval(cfg));
  detail::print_events(sim, printer);
  printer.summaries(sim.summaries());
  return 0;
}

}  // namespace fo::sim
