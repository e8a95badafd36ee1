// Data for the timeline picture (svg.hpp): collected from the store's history, read-only, for
// `failoverctl timeline`, or from a simulation's events for `failoverctl simulate --svg`.
// Bounded: rounds are reduced to a few thousand points, transitions and rows read are capped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ctl/svg.hpp"
#include "daemon/core/simulator.hpp"

namespace fo::store {
class Reader;
}

namespace fo::ctl {

struct TimelineLimits {
  size_t max_rounds = 5'000'000;  // rounds read from the store; the rest of the range is cut
  size_t max_transitions = 2000;  // transitions drawn per group (the newest)
  size_t max_points = svg::HealthReducer::kDefaultMaxPoints;
};

// The history of `group` in [since_ms, until_ms) (0 and INT64_MAX for everything; the picture
// then spans the first to the last record). Throws store::StoreError on read errors, and
// std::runtime_error when the range holds no round and no transition of the group (the message
// names the groups the store knows).
svg::Chart timeline_from_store(store::Reader& reader, const std::string& group, int64_t since_ms,
                               int64_t until_ms, const TimelineLimits& limits = {});

// Collects the events of a simulation (rounds included) into one panel per group.
class SimTimeline {
 public:
  explicit SimTimeline(const std::vector<std::string>& groups, const TimelineLimits& limits = {});
  void add(const core::SimEvent& e);
  svg::Chart chart(const std::string& title);

 private:
  struct Group {
    svg::Panel panel;
    svg::HealthReducer reducer;
    bool any_round = false;
    std::string last_active;
    size_t transitions_left = 0;
  };
  TimelineLimits limits_;
  std::vector<std::string> order_;
  std::map<std::string, Group> groups_;
  int64_t end_ms_ = 0;
};

// The site serving in a state recorded without the site (rows before history schema 2):
// "primary", "secondary", or "" for held, where it depends on the way in.
std::string serving_site_of_state(const std::string& state);

}  // namespace fo::ctl
