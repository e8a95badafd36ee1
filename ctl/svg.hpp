// The timeline picture of `failoverctl timeline --svg` and `simulate --svg`: per group the health
// of both sites over time, which site served traffic (a band under the plot) and the
// transitions (vertical markers), as one self-contained SVG document. A pure function of its
// input; every text is XML-escaped. HealthReducer keeps the input bounded however long the
// history is.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fo::ctl::svg {

// One point of the health series: a round, or neighbouring rounds merged by HealthReducer.
struct HealthPoint {
  int64_t ts_ms = 0;    // time of the first round in the point
  int64_t last_ms = 0;  // time of the last round in the point (== ts_ms for one round)
  // Share of the configured locations that found the site healthy, 0..1; for merged rounds the
  // worst known value, so short dips stay visible.
  double primary = 0;
  double secondary = 0;
  bool primary_known = false;  // false: no round in the point knew the site's health
  bool secondary_known = false;
};

struct TransitionMark {
  int64_t ts_ms = 0;
  std::string from, to;  // state names
  std::string reason;    // shown as the marker's tooltip
};

// The site serving traffic from ts_ms on: "primary", "secondary", or "" when not known.
struct ServedChange {
  int64_t ts_ms = 0;
  std::string site;
};

// Rounds the daemon dropped on queue overflow (the store's gap markers).
struct DroppedRange {
  int64_t first_ms = 0, last_ms = 0;
  uint64_t dropped = 0;
};

struct Panel {
  std::string group;
  std::vector<HealthPoint> health;  // oldest first
  // Consecutive rounds further apart than this are not joined by the lines (the daemon was not
  // running, or rounds are missing). 0: always joined.
  int64_t break_after_ms = 0;
  std::vector<TransitionMark> transitions;  // oldest first
  std::string served_at_start;              // site serving at the chart's start; "" unknown
  std::vector<ServedChange> served;         // oldest first
  std::vector<DroppedRange> dropped;
  std::string note;  // shown next to the group name (e.g. what was cut to keep the input bounded)
};

enum class TimeAxis {
  utc,     // times are epoch milliseconds, labelled in UTC
  offset,  // times are milliseconds from the start of a simulated timeline, labelled "+HH:MM"
};

struct Chart {
  std::string title;
  TimeAxis axis = TimeAxis::utc;
  int64_t start_ms = 0, end_ms = 0;  // shown range; end_ms > start_ms (widened when not)
  std::vector<Panel> panels;
};

// The SVG document (UTF-8, with an XML declaration). Element classes for tools and tests:
// "panel" per group, "transition" per marker, "served" per band segment (attribute data-site),
// "unknown" per stretch of unknown primary health, "dropped" per dropped range, "tick" per
// time-axis label.
std::string render_timeline_svg(const Chart& chart);

// Text safe inside XML character data and attribute values. Control characters other than
// tab and newline (not allowed in XML 1.0) and invalid UTF-8 become U+FFFD.
std::string xml_escape(std::string_view text);

// Keeps a health series bounded: rounds are added oldest first; whenever the series reaches
// twice max_points, neighbouring points are merged pairwise. Also estimates the usual spacing of
// rounds (a log2 histogram of the gaps) to tell missing rounds from the normal rhythm.
class HealthReducer {
 public:
  static constexpr size_t kDefaultMaxPoints = 1500;
  explicit HealthReducer(size_t max_points = kDefaultMaxPoints);

  void add(const HealthPoint& round);
  size_t rounds() const { return rounds_; }
  // Four times the median spacing of the rounds added (rounded up to a power of two), or 0
  // with fewer than two rounds.
  int64_t break_after_ms() const;
  std::vector<HealthPoint> take();

 private:
  void halve();
  size_t max_points_;
  size_t rounds_ = 0;
  std::vector<HealthPoint> points_;
  std::array<uint64_t, 64> spacing_{};  // count of gaps per floor(log2(gap ms))
};

}  // namespace fo::ctl::svg
