// `failoverctl status --watch`: asks for the status again and again until SIGINT or SIGTERM.
// On a terminal each refresh redraws the screen in place; otherwise frames are appended without
// escape codes; with --json each refresh is one JSON object on one line. An unreachable daemon
// is shown and asked again at the next refresh.
#pragma once

#include <chrono>
#include <functional>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>

namespace fo::ctl {

inline constexpr std::chrono::milliseconds kMinWatchInterval{100};
inline constexpr std::chrono::milliseconds kMaxWatchInterval{std::chrono::hours(1)};

struct WatchOptions {
  std::chrono::milliseconds interval{2000};
  bool json = false;
  bool terminal = false;  // stdout is a terminal: redraw in place
};

// One answer: the `status` reply's arguments, or why there is none.
struct WatchSample {
  bool ok = false;
  nlohmann::json arguments;
  std::string error;
};

// What one refresh writes. In place on a terminal: cursor home, each line followed by
// erase-to-end-of-line, then erase below, so the screen does not flicker.
std::string watch_frame(const WatchSample& sample, const WatchOptions& options, int64_t now_ms);

// Refreshes until SIGINT or SIGTERM arrives (both are blocked and waited for with
// sigtimedwait, so a signal during a request ends the loop right after it). Returns 0.
int run_watch(const WatchOptions& options, const std::function<WatchSample()>& fetch,
              std::ostream& out);

}  // namespace fo::ctl
