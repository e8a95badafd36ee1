// Name lookups from timeline or history rows to configured groups and locations, without
// allocating per row. Internal to fo_sim.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "daemon/config/config.hpp"
#include "daemon/core/simulator.hpp"

namespace fo::sim::detail {

class GroupLookup {
 public:
  struct Entry {
    const std::string* name = nullptr;  // the config's string: Simulator::observe takes it as is
    const std::vector<std::string>* locations = nullptr;
    bool has_location(std::string_view loc) const {
      // First byte before the full compare: most candidates differ there.
      for (const auto& l : *locations)
        if (l.size() == loc.size() && !loc.empty() && l[0] == loc[0] && l == loc) return true;
      return false;
    }
  };

  explicit GroupLookup(const config::Config& cfg) {
    for (const auto& g : cfg.groups) index_.emplace(g.name, Entry{&g.name, &g.locations});
  }

  const Entry* find(std::string_view group) const {
    // Rows come in runs of one group: check the last hit before hashing.
    if (last_ && *last_->name == group) return last_;
    auto it = index_.find(group);
    if (it == index_.end()) return nullptr;
    last_ = &it->second;
    return last_;
  }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, Entry, Hash, std::equal_to<>> index_;
  mutable const Entry* last_ = nullptr;
};

std::vector<core::SimGroup> sim_groups(const config::Config& cfg);
std::vector<std::string> group_names(const config::Config& cfg);
// Longest round interval of any group: the simulation runs one of them past the last input.
core::Millis longest_interval(const config::Config& cfg);

// "a, b, c" (at most `limit` names, then ", ...").
inline std::string name_list(const std::vector<std::string>& names, size_t limit = 10) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < limit; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > limit) out += ", ...";
  return out;
}

}  // namespace fo::sim::detail
