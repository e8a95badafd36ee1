// What-if simulation: the real decision engine run in simulated time, fed from a CSV timeline
// (`failoverctl simulate`) or from the round history in the SQLite store (`failoverctl replay`).
// No probes run and no action is executed: actions are reported as events. Format:
// docs/simulate.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

#include "daemon/config/config.hpp"
#include "daemon/core/simulator.hpp"

namespace fo::sim {

struct SimOptions {
  bool json = false;  // one JSON object per line instead of tables
  // Sees every event, rounds included (they are produced only when an observer is set), before
  // it is printed; `simulate --svg` collects its picture this way.
  std::function<void(const core::SimEvent&)> observer;
};

// A bad timeline: the message is "file:line: what is wrong".
class TimelineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Limits on timeline input.
inline constexpr size_t kMaxTimelineLine = 64 * 1024;                  // bytes per line
inline constexpr double kMaxTimelineSeconds = 10.0 * 365 * 24 * 3600;  // 10 years

// One data row of a timeline. The views point into the reader's buffer: valid only during the
// callback.
struct TimelineRow {
  size_t line = 0;     // 1-based line number in the file
  double t = 0;        // seconds from the start, as written
  core::Instant at{};  // t rounded to the millisecond, from simulated time 0
  std::string_view group;
  core::Site site = core::Site::primary;
  std::string_view location;
  bool ok = false;
};

struct TimelineStats {
  size_t rows = 0;   // data rows handed to the callback
  size_t lines = 0;  // lines read, header and blank lines included
  core::Instant last{};
};

// Called once per row in file order. Returns "" to go on, or a message that stops reading and is
// thrown as TimelineError "file:line: message" (the reader adds the position).
using RowHandler = std::function<std::string(const TimelineRow&)>;

// Streams a CSV timeline with header `t,group,site,location,ok` (any column order, extra columns
// ignored, CRLF accepted, blank lines skipped) in constant memory. Throws TimelineError for an
// unreadable file, an empty file, a bad header, a bad row or a row whose t goes backwards.
TimelineStats read_timeline(const std::string& path, const RowHandler& on_row);
// The same over text in memory; `name` is used in error messages.
TimelineStats read_timeline_text(std::string_view text, const std::string& name,
                                 const RowHandler& on_row);

// The simulated form of a configured group: its policy and locations, one probe per site (a
// timeline row is one location's verdict), the configured step names per phase, plans that
// complete at once and succeed.
core::SimGroup sim_group(const config::Group& group);

// `failoverctl simulate`. Returns the exit code: 0 done, 1 input error (printed to err).
int run_simulate(const config::Config& cfg, const std::string& timeline_path,
                 const SimOptions& options, std::ostream& out, std::ostream& err);

// `failoverctl replay`: rounds recorded in [since_ms, until_ms) (epoch milliseconds; pass 0 and
// kForever for everything). t counts from the first replayed round; events also carry ts_ms.
inline constexpr int64_t kForever = std::numeric_limits<int64_t>::max();
int run_replay(const config::Config& cfg, const std::string& db_path, int64_t since_ms,
               int64_t until_ms, const SimOptions& options, std::ostream& out, std::ostream& err);

}  // namespace fo::sim
