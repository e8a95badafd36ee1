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
}

void HealthBoard::record(const Observation& o) {
  auto key = std::make_tuple(static_cast<int>(o.site), o.location, o.probe);
  auto it = latest_.find(key);
  if (it == latest_.end()) {
    latest_.emplace(key, Latest{o.at, o.ok});
  } else if (o.at >= it->second.at) {
    it->second = Latest{o.at, o.ok};
  }
}

SiteHealth HealthBoard::health(Site site, Instant now, const Policy& policy) const {
  SiteHealth h;
  h.configured = static_cast<int>(locations_.size());
  const int s = static_cast<int>(site);
  for (const auto& loc : locations_) {
    LocationView view;
    view.location = loc;
    int fresh_ok = 0, fresh_fail = 0, total = 0;
    for (const auto& probe : probes_[s]) {
      ++total;
      auto it = latest_.find(std::make_tuple(s, loc, probe));
      if (it == latest_.end()) continue;
      if (!view.last_result || it->second.at > *view.last_result) view.last_result = it->second.at;
      if (now - it->second.at > policy.stale_after) continue;
      (it->second.ok ? fresh_ok : fresh_fail)++;
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
