// Timeline data from the store and from simulations (see timeline.hpp).
#include "ctl/timeline.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "daemon/store/reader.hpp"

namespace fo::ctl {
namespace {

constexpr size_t kPage = 10000;    // rounds per query
constexpr size_t kMaxGaps = 1000;  // dropped-round markers drawn
constexpr int64_t kNoEnd = std::numeric_limits<int64_t>::max();

svg::HealthPoint point_of(const store::RoundRecord& r) {
  svg::HealthPoint p;
  p.ts_ms = p.last_ms = r.ts_ms;
  p.primary = r.p_configured > 0 ? double(r.p_healthy) / r.p_configured : 0.0;
  p.secondary = r.s_configured > 0 ? double(r.s_healthy) / r.s_configured : 0.0;
  p.primary_known = r.p_known;
  p.secondary_known = r.s_known;
  return p;
}

svg::HealthPoint point_of(const core::SimEvent& e) {
  svg::HealthPoint p;
  p.ts_ms = p.last_ms = core::to_ms(e.t);
  auto share = [](const core::SiteHealth& h) {
    return h.configured > 0 ? double(h.healthy) / h.configured : 0.0;
  };
  p.primary = share(e.primary);
  p.secondary = share(e.secondary);
  p.primary_known = e.primary.known;
  p.secondary_known = e.secondary.known;
  return p;
}

std::string rounds_note(size_t rounds, size_t points) {
  std::string note = std::to_string(rounds) + (rounds == 1 ? " round" : " rounds");
  if (points < rounds) note += " (drawn as " + std::to_string(points) + " points, worst per point)";
  return note;
}

std::string known_groups(store::Reader& reader) {
  std::string names;
  for (const auto& [name, blob] : reader.load_group_states())
    names += (names.empty() ? "" : ", ") + name;
  return names.empty() ? "none" : names;
}

}  // namespace

std::string serving_site_of_state(const std::string& state) {
  if (state == "primary_active" || state == "primary_degraded" || state == "failing_over")
    return "primary";
  if (state == "secondary_active" || state == "failing_back") return "secondary";
  return "";
}

svg::Chart timeline_from_store(store::Reader& reader, const std::string& group, int64_t since_ms,
                               int64_t until_ms, const TimelineLimits& limits) {
  svg::Panel panel;
  panel.group = group;
  svg::HealthReducer reducer(limits.max_points);

  // Rounds, oldest first, page by page. A page may end inside several rows with the same
  // timestamp; the next one starts at that timestamp again and skips the rows already seen.
  int64_t from = since_ms, last_ts = 0;
  size_t seen_at_last = 0;
  std::string first_state;
  bool cut = false;
  for (;;) {
    const auto page = reader.rounds(group, from, until_ms, kPage);
    size_t i = 0;
    while (i < page.size() && i < seen_at_last && page[i].ts_ms == last_ts) ++i;
    for (; i < page.size(); ++i) {
      if (reducer.rounds() >= limits.max_rounds) {
        cut = true;
        break;
      }
      const store::RoundRecord& r = page[i];
      if (reducer.rounds() == 0) first_state = r.state;
      seen_at_last = r.ts_ms == last_ts ? seen_at_last + 1 : 1;
      last_ts = r.ts_ms;
      reducer.add(point_of(r));
    }
    if (cut || page.size() < kPage) break;
    if (from == last_ts && seen_at_last >= kPage)
      throw store::StoreError("more than " + std::to_string(kPage) + " rounds of group '" + group +
                              "' at one millisecond");
    from = last_ts;
  }
  const size_t rounds = reducer.rounds();
  panel.break_after_ms = reducer.break_after_ms();
  panel.health = reducer.take();
  // A cut history ends where the rounds stop, so transitions after it would float over nothing.
  const int64_t range_end = cut ? last_ts + 1 : until_ms;

  auto transitions = reader.transitions(group, since_ms, range_end, limits.max_transitions);
  const bool transitions_cut = transitions.size() >= limits.max_transitions;
  std::reverse(transitions.begin(), transitions.end());  // oldest first

  if (rounds == 0 && transitions.empty())
    throw std::runtime_error("no rounds and no transitions of group '" + group +
                             "' in the range (groups in the store: " + known_groups(reader) + ")");

  int64_t start = since_ms, end = until_ms;
  if (since_ms <= 0) {
    start = kNoEnd;
    if (!panel.health.empty()) start = panel.health.front().ts_ms;
    if (!transitions.empty()) start = std::min(start, transitions.front().ts_ms);
  }
  if (until_ms == kNoEnd || cut) {
    end = 0;
    if (!panel.health.empty()) end = panel.health.back().last_ms + panel.break_after_ms / 4;
    if (!transitions.empty()) end = std::max(end, transitions.back().ts_ms);
  }

  // The site serving at the start: from the last transition before what is drawn, else from the
  // state of the first round (a group starts on its primary).
  const int64_t before = transitions.empty() ? start : std::min(start, transitions.front().ts_ms);
  const auto previous = reader.transitions(group, 0, before, 1);
  if (!previous.empty())
    panel.served_at_start = previous.front().active.empty()
                                ? serving_site_of_state(previous.front().to)
                                : previous.front().active;
  else
    panel.served_at_start = first_state.empty() ? "primary" : serving_site_of_state(first_state);

  for (const store::TransitionRecord& t : transitions) {
    panel.transitions.push_back({t.ts_ms, t.from, t.to, t.reason});
    panel.served.push_back({t.ts_ms, t.active.empty() ? serving_site_of_state(t.to) : t.active});
  }
  for (const store::GapRecord& g : reader.gaps(group, start, end + 1, kMaxGaps))
    panel.dropped.push_back({g.first_ms, g.last_ms, g.dropped});

  panel.note = rounds_note(rounds, panel.health.size());
  if (cut)
    panel.note += "; stopped after " + std::to_string(limits.max_rounds) +
                  " rounds, narrow the range with --since/--until";
  if (transitions_cut)
    panel.note += "; only the newest " + std::to_string(limits.max_transitions) + " transitions";

  svg::Chart chart;
  chart.title = "failoverd timeline of group " + group;
  chart.axis = svg::TimeAxis::utc;
  chart.start_ms = start;
  chart.end_ms = end;
  chart.panels.push_back(std::move(panel));
  return chart;
}

SimTimeline::SimTimeline(const std::vector<std::string>& groups, const TimelineLimits& limits)
    : limits_(limits), order_(groups) {
  for (const auto& name : groups) {
    Group g{{}, svg::HealthReducer(limits.max_points), false, "", limits.max_transitions};
    g.panel.group = name;
    groups_.emplace(name, std::move(g));
  }
}

void SimTimeline::add(const core::SimEvent& e) {
  auto it = groups_.find(e.group);
  if (it == groups_.end()) return;
  Group& g = it->second;
  const int64_t t = core::to_ms(e.t);
  end_ms_ = std::max(end_ms_, t);
  if (e.kind == core::SimEvent::Kind::round) {
    g.reducer.add(point_of(e));
    const std::string active(core::to_string(e.active));
    if (!g.any_round)
      g.panel.served_at_start = active;
    else if (active != g.last_active)
      g.panel.served.push_back({t, active});
    g.any_round = true;
    g.last_active = active;
  } else if (e.kind == core::SimEvent::Kind::transition) {
    if (g.transitions_left == 0) return;
    --g.transitions_left;
    g.panel.transitions.push_back(
        {t, std::string(core::to_string(e.from)), std::string(core::to_string(e.to)), e.reason});
  }
}

svg::Chart SimTimeline::chart(const std::string& title) {
  svg::Chart chart;
  chart.title = title;
  chart.axis = svg::TimeAxis::offset;
  chart.start_ms = 0;
  chart.end_ms = end_ms_;
  for (const auto& name : order_) {
    Group& g = groups_.at(name);
    const size_t rounds = g.reducer.rounds();
    g.panel.break_after_ms = g.reducer.break_after_ms();
    g.panel.health = g.reducer.take();
    g.panel.note = rounds_note(rounds, g.panel.health.size());
    if (g.transitions_left == 0)
      g.panel.note +=
          "; only the first " + std::to_string(limits_.max_transitions) + " transitions";
    if (!g.any_round) g.panel.served_at_start = "";
    chart.panels.push_back(std::move(g.panel));
  }
  return chart;
}

}  // namespace fo::ctl
