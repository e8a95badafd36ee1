// Three-valued location verdicts: a definite failure is known even when other probes are
// silent; missing data is never read as "down".
#include "health.hpp"

namespace fo::core {

std::string_view to_string(Verdict v) {
  switch (v) {
    case Verdict::healthy:
      return "healthy";
    case Verdict::unhealthy:
      return "unhealthy";
    case Verdict::missing:
      return "missing";
  }
  return "?";
}

std::string SiteHealth::fraction() const {
  std::string f = std::to_string(healthy) + "/" + std::to_string(reporting);
  if (!known)
    return "unknown (" + std::to_string(reporting) + "/" + std::to_string(configured) +
           " reporting)";
  return f;
}

HealthBoard::HealthBoard(std::vector<std::string> locations,
                         std::vector<std::string> primary_probes,
                         std::vector<std::string> secondary_probes)
    : locations_(std::move(locations)) {
  probes_[0] = std::move(primary_probes);
  probes_[1] = std::move(secondary_probes);
  for (size_t i = 0; i < locations_.size(); ++i) location_index_.emplace(locations_[i], i);
  for (int s = 0; s < 2; ++s) {
    for (size_t i = 0; i < probes_[s].size(); ++i) probe_index_[s].emplace(probes_[s][i], i);
    latest_[s].resize(locations_.size() * probes_[s].size());
  }
}

void HealthBoard::record(const Observation& o) {
  const int s = static_cast<int>(o.site);
  auto loc = location_index_.find(o.location);
  if (loc == location_index_.end()) return;
  auto probe = probe_index_[s].find(o.probe);
  if (probe == probe_index_[s].end()) return;
  Latest& l = slot(s, loc->second, probe->second);
  if (!l.seen || o.at >= l.at) l = Latest{o.at, o.ok, true};
}

SiteHealth HealthBoard::health(Site site, Instant now, const Policy& policy) const {
  SiteHealth h;
  h.configured = static_cast<int>(locations_.size());
  const int s = static_cast<int>(site);
  h.locations.reserve(locations_.size());
  for (size_t li = 0; li < locations_.size(); ++li) {
    LocationView view;
    view.location = locations_[li];
    int fresh_ok = 0, fresh_fail = 0, total = 0;
    for (size_t pi = 0; pi < probes_[s].size(); ++pi) {
      ++total;
      const Latest& l = slot(s, li, pi);
      if (!l.seen) continue;
      if (!view.last_result || l.at > *view.last_result) view.last_result = l.at;
      if (now - l.at > policy.stale_after) continue;
      (l.ok ? fresh_ok : fresh_fail)++;
    }
    if (policy.require == Require::all) {
      if (fresh_fail > 0)
        view.verdict = Verdict::unhealthy;
      else if (total > 0 && fresh_ok == total)
        view.verdict = Verdict::healthy;
    } else {
      if (fresh_ok > 0)
        view.verdict = Verdict::healthy;
      else if (total > 0 && fresh_fail == total)
        view.verdict = Verdict::unhealthy;
    }
    if (view.verdict != Verdict::missing) ++h.reporting;
    if (view.verdict == Verdict::healthy) ++h.healthy;
    h.locations.push_back(std::move(view));
  }
  h.known = h.reporting > 0 && h.reporting >= policy.min_locations;
  return h;
}

}  // namespace fo::core
