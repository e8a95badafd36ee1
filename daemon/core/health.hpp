// Health of a site as seen from several locations: latest result per (site, location, probe),
// freshness, and the share of reporting locations that see the site healthy. Pure.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "types.hpp"

namespace fo::core {

// One probe result: (time, site, location, probe, ok). The group is implicit (one board per group).
struct Observation {
  Instant at;
  Site site = Site::primary;
  std::string location;
  std::string probe;  // probe id within the site, e.g. "http#0"; the timeline uses ""
  bool ok = false;
};

// A location's verdict for one site at one moment.
enum class Verdict { healthy, unhealthy, missing };
std::string_view to_string(Verdict v);

struct LocationView {
  std::string location;
  Verdict verdict = Verdict::missing;
  std::optional<Instant> last_result;  // newest result from that location, fresh or not
};

struct SiteHealth {
  int healthy = 0;     // healthy reporting locations
  int reporting = 0;   // locations with a fresh verdict
  int configured = 0;  // locations configured for the group
  bool known = false;  // reporting >= min_locations
  double ratio() const { return reporting > 0 ? double(healthy) / reporting : 0.0; }
  std::string fraction() const;  // "4/6", or "unknown (1/6 reporting)" when !known
  std::vector<LocationView> locations;
};

class HealthBoard {
 public:
  // locations: the group's configured locations; probes: the probe ids of each site.
  HealthBoard(std::vector<std::string> locations, std::vector<std::string> primary_probes,
              std::vector<std::string> secondary_probes);

  // Keeps the newest result per (site, location, probe); older or unknown ones are ignored.
  void record(const Observation& o);
  SiteHealth health(Site site, Instant now, const Policy& policy) const;
  const std::vector<std::string>& locations() const { return locations_; }

 private:
  struct Latest {
    Instant at{};
    bool ok = false;
    bool seen = false;
  };
  // Dense [site][location][probe] table: record() is two hash lookups, health() none.
  Latest& slot(int site, size_t loc, size_t probe) {
    return latest_[site][loc * probes_[site].size() + probe];
  }
  const Latest& slot(int site, size_t loc, size_t probe) const {
    return latest_[site][loc * probes_[site].size() + probe];
  }
  std::vector<std::string> locations_;
  std::vector<std::string> probes_[2];
  std::unordered_map<std::string, size_t> location_index_;
  std::unordered_map<std::string, size_t> probe_index_[2];
  std::vector<Latest> latest_[2];
};

}  // namespace fo::core
